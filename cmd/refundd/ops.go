package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/user"
	"strings"
	"text/tabwriter"
	"time"
	"unicode/utf16"
	"unicode/utf8"

	"entgo.io/ent/dialect"
	entsql "entgo.io/ent/dialect/sql"

	"github.com/fencekit/fencekit/ent"
	"github.com/fencekit/fencekit/fencedwrite"
	"github.com/fencekit/fencekit/internal/term"
	"github.com/fencekit/fencekit/ledger"
	"github.com/fencekit/fencekit/money"
	"github.com/fencekit/fencekit/operator"
)

// openClient opens the fenced data layer on dsn. A DSN the driver cannot
// read is reported against -dsn, without echoing it (it may hold a
// password).
func openClient(dsn string) (*ent.Client, error) {
	db, err := fencedwrite.OpenDB(dsn, fencedwrite.DSNOptions{})
	if err != nil {
		return nil, fmt.Errorf("-dsn: %w", err)
	}
	return ent.NewClient(ent.Driver(entsql.OpenDB(dialect.MySQL, db))), nil
}

// enqueueFlags are enqueue's flags; the amount is in major units.
type enqueueFlags struct {
	key, payment, amount, currency string
	// dispatch.amqpURL, when set, is the broker the new job's id is
	// published to (refundd run -dispatch rabbitmq consumes it).
	dispatch dispatchFlags
}

// request checks the flags and returns the request, with errors that name
// the flag and the value.
func (f enqueueFlags) request() (ent.RefundJobEnqueue, error) {
	p := ent.RefundJobEnqueue{OperationKey: f.key, PaymentRef: f.payment, Currency: f.currency}
	var errs []error
	for _, c := range []struct{ flag, v string }{{"-key", f.key}, {"-payment", f.payment}, {"-currency", f.currency}, {"-amount", f.amount}} {
		if c.v == "" {
			errs = append(errs, fmt.Errorf("%s is required", c.flag))
		}
	}
	if len(errs) > 0 {
		return p, errors.Join(errs...)
	}
	if len(f.currency) != 3 || strings.ToUpper(f.currency) != f.currency {
		return p, fmt.Errorf("-currency %q: must be a three-letter upper-case ISO 4217 code such as EUR", f.currency)
	}
	minor, err := money.Parse(f.amount, f.currency)
	if err != nil {
		return p, fmt.Errorf("-amount %q: %w", f.amount, err)
	}
	p.AmountMinor = minor
	return p, nil
}

// entFlags maps the job's columns to enqueue's flags, for the data layer's
// validation errors.
var entFlags = map[string]string{"operation_key": "-key", "payment_ref": "-payment", "amount_minor": "-amount", "currency": "-currency"}

func fieldValue(f enqueueFlags, column string) string {
	switch column {
	case "operation_key":
		return f.key
	case "payment_ref":
		return f.payment
	case "amount_minor":
		return f.amount
	}
	return f.currency
}

// enqueue enqueues one approved refund request with its ledger row.
func enqueue(ctx context.Context, dsn string, f enqueueFlags, out io.Writer) error {
	p, err := f.request()
	if err != nil {
		return fmt.Errorf("enqueue: %w", err)
	}
	c, err := openClient(dsn)
	if err != nil {
		return fmt.Errorf("enqueue: %w", err)
	}
	defer c.Close()
	job, created, err := c.RefundJob.Enqueue(ctx, p, ledger.Open(p))
	var ve *ent.ValidationError
	var fe *fencedwrite.FieldError
	switch {
	case errors.As(err, &fe) && entFlags[fe.Field] != "":
		return fmt.Errorf("enqueue: %s %q: %s", entFlags[fe.Field], fieldValue(f, fe.Field), fe.Problem)
	case errors.Is(err, fencedwrite.ErrKeyArchived):
		fmt.Fprintf(out, "enqueue: %s was enqueued before and its job is archived: nothing to do\n", p.OperationKey)
		return nil
	case errors.As(err, &ve):
		name := ve.Name
		if i := strings.LastIndex(name, "."); i >= 0 {
			name = name[i+1:]
		}
		if flag, ok := entFlags[name]; ok {
			return fmt.Errorf("enqueue: %s: %w", flag, errors.Unwrap(ve))
		}
		return fmt.Errorf("enqueue: %w", err)
	case err != nil:
		return fmt.Errorf("enqueue: %w", err)
	case created:
		fmt.Fprintf(out, "enqueue: job %d for %s, %s, ready\n", job.ID, p.OperationKey, operator.Amount{Minor: p.AmountMinor, Currency: p.Currency})
		if f.dispatch.publishes() {
			publishEnqueued(ctx, f.dispatch, job.ID, job.OperationKey, out)
		}
	default:
		fmt.Fprintf(out, "enqueue: %s is already job %d (%s at attempt %d): nothing to do\n", p.OperationKey, job.ID, job.State, job.Attempt)
	}
	return nil
}

// openOperator opens the operators' API on dsn with the provider of p,
// which the workers of refundd run see alike (provider.go): the same
// lookups, the same key window.
func openOperator(dsn string, p providerConfig) (*operator.Service, func(), error) {
	prov, err := p.client()
	if err != nil {
		return nil, nil, err
	}
	c, err := openClient(dsn)
	if err != nil {
		return nil, nil, err
	}
	ops, err := operator.New(operator.Config{Client: c, Provider: prov, LookupTimeout: p.timeout, Claim: p.claim()})
	if err != nil {
		c.Close()
		return nil, nil, err
	}
	return ops, func() { c.Close() }, nil
}

// loginName is the default operator identity: the login name.
func loginName() string {
	if u, err := user.Current(); err == nil && u.Username != "" {
		return u.Username
	}
	return os.Getenv("USER")
}

// jobsFlags are the flags of refundd jobs.
type jobsFlags struct {
	id                            int64
	state, key, payment, refundID string
	reason, after                 string
	limit                         int
	prefix, left, json            bool
	provider                      providerConfig
}

func (f *jobsFlags) register(fs *flag.FlagSet) {
	fs.Int64Var(&f.id, "id", 0, "show this job: its status line, facts, decisions, timeline, audit, evidence and approval requests")
	fs.StringVar(&f.state, "state", "", "only jobs in this state (ready, running, succeeded, manual_review, failed); manual_review alone shows the operators' queue, oldest first")
	fs.StringVar(&f.key, "key", "", "only the job of this operation key (with -prefix: the keys that start with it)")
	fs.StringVar(&f.payment, "payment", "", "only the jobs of this payment reference (with -prefix: that start with it)")
	fs.StringVar(&f.refundID, "refund-id", "", "only the jobs with this provider refund id (with -prefix: that start with it)")
	fs.BoolVar(&f.prefix, "prefix", false, "-key, -payment and -refund-id match the values that start with them")
	fs.StringVar(&f.reason, "reason", "", "with -state manual_review: only the jobs whose review reason is of this kind ("+reasonKeys()+")")
	fs.BoolVar(&f.left, "left", false, "the jobs that left manual review, newest first: who, whether verified, and why")
	fs.IntVar(&f.limit, "limit", operator.DefaultLimit, fmt.Sprintf("at most this many lines (1 to %d)", operator.MaxLimit))
	fs.StringVar(&f.after, "after", "", "the next page: the cursor the previous page printed")
	fs.BoolVar(&f.json, "json", false, "print JSON instead of a table")
	f.provider.register(fs)
}

func reasonKeys() string {
	var keys []string
	for _, k := range operator.ReasonKinds() {
		keys = append(keys, k.Key)
	}
	return strings.Join(keys, ", ")
}

// jobs lists jobs (a search, the manual review queue, or the jobs that left
// it), or shows one job. Both print the operator view's facts, as the
// console shows them. Output is deterministic: the same data prints the
// same bytes.
func jobs(ctx context.Context, dsn string, f jobsFlags, w io.Writer) error {
	out := &visibleWriter{w: w}
	defer out.flush()
	if f.limit < 1 || f.limit > operator.MaxLimit {
		return fmt.Errorf("jobs: -limit %d: must be between 1 and %d", f.limit, operator.MaxLimit)
	}
	if f.reason != "" && f.state != "manual_review" {
		return fmt.Errorf("jobs: -reason %q goes with -state manual_review", f.reason)
	}
	ops, done, err := openOperator(dsn, f.provider)
	if err != nil {
		return fmt.Errorf("jobs: %w", err)
	}
	defer done()
	page := operator.Page{Limit: f.limit, After: f.after}
	q := operator.Query{State: f.state, OperationKey: f.key, PaymentRef: f.payment, ProviderRefundID: f.refundID, Prefix: f.prefix}
	var v any
	switch {
	case f.id != 0:
		if f.id < 0 {
			return fmt.Errorf("jobs: -id %d: must be a job id", f.id)
		}
		view, err := ops.Job(ctx, f.id)
		if err != nil {
			return fmt.Errorf("jobs: -id %d: %w", f.id, err)
		}
		if !f.json {
			return printJob(out, view)
		}
		v = view
	case f.left:
		p, err := ops.Departures(ctx, page)
		if err != nil {
			return fmt.Errorf("jobs: %w", flagged(err))
		}
		if !f.json {
			return printDepartures(out, p)
		}
		v = p
	case q == operator.Query{State: "manual_review"}:
		p, err := ops.Queue(ctx, f.reason, page)
		if err != nil {
			return fmt.Errorf("jobs: %w", flagged(err))
		}
		if !f.json {
			return printQueue(out, p)
		}
		v = p
	default:
		p, err := ops.Search(ctx, q, page)
		if err != nil {
			return fmt.Errorf("jobs: %w", flagged(err))
		}
		if !f.json {
			return printJobs(out, p)
		}
		v = p
	}
	enc := json.NewEncoder(out)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// flagged rewrites a field error of the operator API to name the CLI's
// flag; any other refusal becomes the API's sentence, with its cause.
func flagged(err error) error {
	var fe *fencedwrite.FieldError
	if errors.As(err, &fe) && !strings.Contains(err.Error(), "\n") {
		return fmt.Errorf("-%s: %s", fe.Field, fe.Problem)
	}
	if status, sentence := operator.Explain(err); status != http.StatusInternalServerError && !errors.Is(err, operator.ErrInvalid) {
		return fmt.Errorf("%s (%w)", strings.TrimSuffix(sentence, "."), err)
	}
	return err
}

// tf is the views' one time format.
func tf(t time.Time) string { return operator.Stamp(t) }

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func printJobs(out io.Writer, p operator.JobsPage) error {
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tAMOUNT\tSTATE\tOPERATION KEY\tPAYMENT\tPROVIDER REFUND\tSTATUS")
	for _, j := range p.Jobs {
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%s\n", j.ID, j.Amount, j.State, term.Inert(j.OperationKey), term.Inert(j.PaymentRef),
			orDash(term.Inert(j.ProviderRefundID)), j.Status)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	return printNext(out, len(p.Jobs), p.Next)
}

func printQueue(out io.Writer, p operator.QueuePage) error {
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tAMOUNT\tIN REVIEW SINCE\tWAITING\tWHY\tON IT\tSTATUS")
	for _, it := range p.Items {
		onIt := "-"
		if it.OnIt != nil {
			onIt = term.Inert(it.OnIt.Operator)
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%s\n", it.ID, it.Amount, tf(it.Since), it.Age.Truncate(time.Second), it.ReasonLabel(), onIt, it.Status)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	return printNext(out, len(p.Items), p.Next)
}

func printDepartures(out io.Writer, p operator.DeparturesPage) error {
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "LEFT AT\tID\tOPERATION KEY\tNOW\tWHAT HAPPENED")
	for _, d := range p.Departures {
		what := d.Text
		if d.Unverified() {
			what += " [UNVERIFIED]"
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s@%d\t%s\n", tf(d.At), d.JobID, term.Inert(d.OperationKey), d.StateAfter, d.AttemptAfter, what)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	return printNext(out, len(p.Departures), p.Next)
}

func printNext(out io.Writer, n int, cursor string) error {
	if cursor != "" {
		_, err := fmt.Fprintf(out, "%d shown; next page: -after %s\n", n, cursor)
		return err
	}
	_, err := fmt.Fprintf(out, "%d shown\n", n)
	return err
}

// printJob prints one job as the console shows it: the status line, the
// facts under the same labels, the decisions, what happened, the requests,
// the audit, the evidence, then the engineering details; each list in the
// view's deterministic order.
func printJob(out io.Writer, v *operator.JobView) error {
	w := &errWriter{w: out}
	w.printf("job %d: %s to %s\n", v.ID, v.Amount, term.Inert(v.PaymentRef))
	w.printf("%s\n", v.Status)
	if v.Unverified != nil {
		w.printf("%s\n", v.Unverified.Text())
	}
	printFacts(w, v.Facts)
	if len(v.Detail.Options) > 0 {
		w.printf("decide\n")
		for _, o := range v.Detail.Options {
			w.printf("  %s\n", o.Title)
			for _, f := range o.Facts {
				w.printf("    - %s\n", f)
			}
			if o.Refused != "" {
				w.printf("    not now: %s\n", o.Refused)
			}
		}
	}
	w.printf("what happened\n")
	for _, e := range v.Timeline {
		w.printf("  %s  %s\n", tf(e.At), e.Text)
	}
	if len(v.Approvals) > 0 {
		w.printf("approval requests (%d)\n", len(v.Approvals))
		for _, a := range v.Approvals {
			w.printf("  %s\n", approvalLine(a))
		}
	}
	w.printf("operator actions (%d)\n", len(v.Audit))
	for _, a := range v.Audit {
		w.printf("  #%d %s %s (%s@%d -> %s@%d)\n", a.ID, tf(a.RecordedAt), a.Text, a.StateBefore, a.AttemptBefore, a.StateAfter, a.AttemptAfter)
	}
	w.printf("evidence from the provider (%d)\n", len(v.Evidence))
	for _, e := range v.Evidence {
		w.printf("  #%d %s %s raw: %s\n", e.ID, tf(e.ReceivedAt), e.Text, oneLine(e.Payload))
	}
	w.printf("engineering details\n")
	printFacts(w, v.Engineering)
	w.printf("  attempts (%d)\n", len(v.Attempts))
	for _, a := range v.Attempts {
		// Which process (or operator) held the attempt, from the attempts
		// log; "-" for an attempt taken before the log existed.
		held := fmt.Sprintf("%-10s %s", orDash(a.Op), orDash(term.Inert(a.Holder)))
		if a.ClaimedAt != nil {
			held += " at " + tf(*a.ClaimedAt)
		}
		if a.LeaseUntil != nil {
			held += ", lease until " + tf(*a.LeaseUntil)
		}
		w.printf("    @%d %s; %s, evidence %v\n", a.Attempt, held, a.StartedBy, a.Evidence)
	}
	return w.err
}

// printFacts prints labelled facts, a value of several lines indented
// under its label.
func printFacts(w *errWriter, fs []operator.Fact) {
	width := 0
	for _, f := range fs {
		width = max(width, len(f.Label))
	}
	for _, f := range fs {
		lines := strings.Split(f.Value, "\n")
		w.printf("  %-*s  %s\n", width, f.Label, strings.Join(lines, "\n"+strings.Repeat(" ", width+4)))
	}
}

// approvalLine is one approval request with its facts, on one line.
func approvalLine(a operator.Approval) string {
	s := fmt.Sprintf("request %d: job %d, %s: %s Asked by %s at %s, seeing attempt %d: %s. Status: %s",
		a.ID, a.JobID, a.Amount, a.Asks, term.Inert(a.RequestedBy), tf(a.RequestedAt), a.SeenAttempt, oneLine(a.Reason), a.Status)
	if a.Closed != "" {
		s += ": " + a.Closed
	}
	return s
}

// printApproval prints a pending request with the facts its approver
// decides on, as the console's approvals page shows them.
func printApproval(w *errWriter, a operator.Approval) {
	w.printf("request %d: job %d, %s to %s\n", a.ID, a.JobID, a.Amount, term.Inert(a.PaymentRef))
	w.printf("  asks      %s\n", a.Asks)
	w.printf("  asked by  %s, %s, seeing attempt %d\n", term.Inert(a.RequestedBy), tf(a.RequestedAt), a.SeenAttempt)
	w.printf("  reason    %s\n", oneLine(a.Reason))
	w.printf("  the job   %s\n", a.JobStatus)
	if a.LastAnswer != "" {
		w.printf("  answered  %s\n", a.LastAnswer)
	}
	if a.JobMoved {
		w.printf("  MOVED     the job moved since the request: approving it will be refused\n")
	}
	if v := a.Verification; v != nil {
		w.printf("  provider  %s\n", v.Said)
		for _, f := range v.Fields {
			same := "same"
			if !f.Same {
				same = "DIFFERS"
			}
			w.printf("    %-10s job %s, provider %s: %s\n", f.Field, f.Job, f.Provider, same)
		}
	}
	if a.Override {
		w.printf("  approve with: refundd approve -id %d -operator NAME -confirm %s\n", a.ID, term.Inert(a.RefundID))
	} else {
		w.printf("  approve with: refundd approve -id %d -operator NAME\n", a.ID)
	}
}

type errWriter struct {
	w   io.Writer
	err error
}

func (w *errWriter) printf(format string, args ...any) {
	if w.err == nil {
		_, w.err = fmt.Fprintf(w.w, format, args...)
	}
}

// resolveFlags are the flags of refundd resolve.
type resolveFlags struct {
	id, attempt          int64
	as, refundID, reason string
	operator             string
	override, onIt       bool
	provider             providerConfig
}

func (f *resolveFlags) register(fs *flag.FlagSet) {
	fs.Int64Var(&f.id, "id", 0, "the job in manual review (required)")
	fs.StringVar(&f.as, "as", "", "succeeded (with -refund-id, verified with the provider), reconcile, or refund (send again with the same key: needs a second operator's approval)")
	fs.StringVar(&f.reason, "reason", "", "why (required): recorded in the audit and added to the job's evidence")
	fs.StringVar(&f.refundID, "refund-id", "", "the provider's refund id, with -as succeeded")
	fs.StringVar(&f.operator, "operator", loginName(), "who decides (default: the login name)")
	fs.BoolVar(&f.override, "override", false, "with -as succeeded: settle on a refund the provider cannot confirm or deny; files a request a second operator must approve, and the job stays marked unverified")
	fs.BoolVar(&f.onIt, "on-it", false, "instead of resolving: tell the other operators you are on this job (\"I'm on it\")")
	fs.Int64Var(&f.attempt, "attempt", 0, "the attempt you saw the job at (default: the job's attempt now, printed); the resolution is fenced on it")
	f.provider.register(fs)
}

// resolve is an operator's resolution of a job in manual review, through
// package operator: verified, audited, fenced on the attempt seen. A resend
// or an override files an approval request instead.
func resolve(ctx context.Context, dsn string, f resolveFlags, w io.Writer) error {
	out := &visibleWriter{w: w}
	defer out.flush()
	switch {
	case f.id <= 0:
		return fmt.Errorf("resolve: -id %d: must be the id of a job in manual review", f.id)
	case f.onIt:
	case f.as == "":
		return errors.New("resolve: -as is required: succeeded, reconcile or refund")
	case strings.TrimSpace(f.reason) == "":
		return errors.New("resolve: -reason is required: say why")
	case f.as == string(operator.AsSucceeded) && f.provider.kind != providerStripe && f.provider.providerURL == "":
		return errors.New("resolve: -as succeeded verifies the refund id with the provider: -provider-url (or $FENCEKIT_PROVIDER_URL) is required, as for refundd run")
	}
	ops, done, err := openOperator(dsn, f.provider)
	if err != nil {
		return fmt.Errorf("resolve: %w", err)
	}
	defer done()
	seen := f.attempt
	if seen == 0 {
		v, err := ops.Job(ctx, f.id)
		if err != nil {
			return fmt.Errorf("resolve: -id %d: %w", f.id, err)
		}
		seen = v.Attempt
		fmt.Fprintf(out, "resolve: job %d is %s at attempt %d\n  %s\n", v.ID, v.State, v.Attempt, v.Status)
	}
	if f.onIt {
		o, err := ops.OnIt(ctx, f.id, f.operator, seen)
		if err != nil {
			return fmt.Errorf("resolve: %w", flagged(err))
		}
		fmt.Fprintf(out, "resolve: %s is on job %d since %s\n", term.Inert(o.Operator), f.id, tf(o.Since))
		return nil
	}
	r := operator.Resolution{JobID: f.id, As: operator.Action(f.as), RefundID: f.refundID, Reason: f.reason, Operator: f.operator,
		SeenAttempt: seen, Override: f.override}
	if r.As == operator.AsRefund || r.Override {
		a, err := ops.RequestApproval(ctx, r)
		if err != nil {
			return fmt.Errorf("resolve: %w", flagged(err))
		}
		fmt.Fprintf(out, "resolve: %s needs a second operator: filed\n", f.as)
		ew := &errWriter{w: out}
		printApproval(ew, a)
		return ew.err
	}
	res, err := ops.Resolve(ctx, r)
	if err != nil {
		return fmt.Errorf("resolve: %w", flagged(err))
	}
	fmt.Fprintf(out, "resolve: job %d resolved as %s by %s: %s at attempt %d (audit #%d)\n", res.JobID, f.as, f.operator, res.State, res.Attempt, res.AuditID)
	return nil
}

// approveFlags are the flags of refundd approve.
type approveFlags struct {
	id       int64
	operator string
	decline  bool
	reason   string
	confirm  string
	list     bool
	provider providerConfig
}

func (f *approveFlags) register(fs *flag.FlagSet) {
	fs.Int64Var(&f.id, "id", 0, "the approval request (refundd resolve prints it; -list shows the pending ones)")
	fs.StringVar(&f.operator, "operator", loginName(), "who approves: never the requester (default: the login name)")
	fs.BoolVar(&f.decline, "decline", false, "decline the request instead (with -reason); the requester may withdraw it")
	fs.StringVar(&f.reason, "reason", "", "why, with -decline")
	fs.StringVar(&f.confirm, "confirm", "", "an override's typed confirmation: the refund id the job will be settled on without the provider's confirmation")
	fs.BoolVar(&f.list, "list", false, "list the pending approval requests, oldest first, with the facts to decide on")
	f.provider.register(fs)
}

// approve carries out (or declines) an approval request as a second
// operator, or lists the pending ones with their facts.
func approve(ctx context.Context, dsn string, f approveFlags, vout io.Writer) error {
	out := &visibleWriter{w: vout}
	defer out.flush()
	if !f.list && f.id <= 0 {
		return fmt.Errorf("approve: -id %d: must be an approval request id (see refundd approve -list)", f.id)
	}
	ops, done, err := openOperator(dsn, f.provider)
	if err != nil {
		return fmt.Errorf("approve: %w", err)
	}
	defer done()
	w := &errWriter{w: out}
	switch {
	case f.list:
		p, err := ops.Approvals(ctx, true, operator.Page{Limit: operator.MaxLimit})
		if err != nil {
			return fmt.Errorf("approve: %w", err)
		}
		for _, a := range p.Approvals {
			printApproval(w, a)
		}
		w.printf("%d pending\n", len(p.Approvals))
		return w.err
	case f.decline:
		a, err := ops.Decline(ctx, f.id, f.operator, f.reason)
		if err != nil {
			return fmt.Errorf("approve: %w", flagged(err))
		}
		w.printf("approve: request %d declined: %s\n", a.ID, a.Closed)
		return w.err
	}
	if f.provider.kind != providerStripe && f.provider.providerURL == "" {
		return errors.New("approve: an approval checks the provider again: -provider-url (or $FENCEKIT_PROVIDER_URL) is required, as for refundd run")
	}
	res, err := ops.Approve(ctx, f.id, f.operator, f.confirm)
	if err != nil {
		return fmt.Errorf("approve: %w", flagged(err))
	}
	w.printf("approve: request %d approved by %s: job %d %s at attempt %d (audit #%d)\n", res.RequestID, f.operator, res.JobID, res.State, res.Attempt, res.AuditID)
	return w.err
}

// oneLine is s on one line, inert in a terminal, at most 120 bytes.
func oneLine(s string) string {
	s = term.Inert(strings.Join(strings.Fields(s), " "))
	if len(s) > 120 {
		s = s[:117] + "..."
	}
	return s
}

// visibleWriter writes the operators' commands' output with every
// character that could hide or reorder text on a terminal (control
// characters but tab and newline, bidirectional and other invisible format
// characters, line and paragraph separators) written out as \uXXXX (a
// surrogate pair beyond the BMP, so that -json stays valid JSON meaning the
// same text), and invalid UTF-8 as \xXX: whatever a field's printing
// forgot, no output of jobs, resolve or approve shows such a character
// raw. A rune split across writes is held until its end arrives.
type visibleWriter struct {
	w    io.Writer
	tail []byte
}

func (v *visibleWriter) Write(p []byte) (int, error) {
	b := append(v.tail, p...)
	v.tail = nil
	// Hold back an incomplete rune at the end.
	for i := max(0, len(b)-utf8.UTFMax+1); i < len(b); i++ {
		if utf8.RuneStart(b[i]) && !utf8.FullRune(b[i:]) {
			v.tail, b = append([]byte(nil), b[i:]...), b[:i]
			break
		}
	}
	if _, err := v.w.Write(visibleBytes(b)); err != nil {
		return 0, err
	}
	return len(p), nil
}

// flush writes a rune left incomplete at the end, escaped.
func (v *visibleWriter) flush() {
	if len(v.tail) > 0 {
		_, _ = v.w.Write(visibleBytes(v.tail))
		v.tail = nil
	}
}

func visibleBytes(b []byte) []byte {
	out := make([]byte, 0, len(b))
	for i := 0; i < len(b); {
		r, size := utf8.DecodeRune(b[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			out = fmt.Appendf(out, `\x%02x`, b[i])
		case r != '\n' && r != '\t' && term.Hides(r):
			if r > 0xFFFF {
				r1, r2 := utf16.EncodeRune(r)
				out = fmt.Appendf(out, `\u%04x\u%04x`, r1, r2)
			} else {
				out = fmt.Appendf(out, `\u%04x`, r)
			}
		default:
			out = append(out, b[i:i+size]...)
		}
		i += size
	}
	return out
}
