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

	"entgo.io/ent/dialect"
	entsql "entgo.io/ent/dialect/sql"

	"github.com/fencekit/fencekit/ent"
	"github.com/fencekit/fencekit/fencedwrite"
	"github.com/fencekit/fencekit/internal/money"
	"github.com/fencekit/fencekit/internal/term"
	"github.com/fencekit/fencekit/ledger"
	"github.com/fencekit/fencekit/operator"
	"github.com/fencekit/fencekit/provider"
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

// providerFlags declare the provider an operator's command verifies with,
// as refundd run declares it.
type providerFlags struct {
	url, lookups string
	safeResend   bool
	retention    time.Duration
	skew         time.Duration
	timeout      time.Duration
}

func (p *providerFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&p.url, "provider-url", os.Getenv("FENCEKIT_PROVIDER_URL"), "base URL of the provider's refund API, to verify refund ids and resends (default $FENCEKIT_PROVIDER_URL)")
	fs.StringVar(&p.lookups, "provider-lookups", "reference,payment,refund-id", "the lookups the provider offers, as for refundd run")
	fs.BoolVar(&p.safeResend, "provider-safe-resend", true, "the provider executes the same key with the same parameters at most once while retained")
	fs.DurationVar(&p.retention, "provider-key-retention", 24*time.Hour, "how long the provider keeps an idempotency key")
	fs.DurationVar(&p.skew, "provider-skew-margin", fencedwrite.DefaultSkewMargin, "clock difference allowed between us and the provider, taken off the key's window")
	fs.DurationVar(&p.timeout, "provider-timeout", operator.DefaultLookupTimeout, "bound of one provider lookup")
}

// client returns the provider client, or nil when no URL is given (the
// actions that need it then answer that the provider is unavailable).
func (p providerFlags) client() (provider.Client, error) {
	switch {
	case p.skew < 0:
		return nil, fmt.Errorf("-provider-skew-margin %v: must not be negative: it would widen the key's resend window past the provider's retention", p.skew)
	case p.timeout < 0:
		return nil, fmt.Errorf("-provider-timeout %v: must not be negative", p.timeout)
	}
	if p.url == "" {
		return nil, nil
	}
	if err := checkProviderURL(p.url); err != nil {
		return nil, err
	}
	caps, err := runFlags{providerLookups: p.lookups, safeResend: p.safeResend, keyRetention: p.retention}.capabilities()
	if err != nil {
		return nil, err
	}
	return provider.NewHTTPClient(p.url, &http.Client{}, caps), nil
}

// openOperator opens the operators' API on dsn with the provider of p.
func openOperator(dsn string, p providerFlags) (*operator.Service, func(), error) {
	prov, err := p.client()
	if err != nil {
		return nil, nil, err
	}
	c, err := openClient(dsn)
	if err != nil {
		return nil, nil, err
	}
	ops, err := operator.New(operator.Config{Client: c, Provider: prov, LookupTimeout: p.timeout,
		Claim: fencedwrite.ClaimOptions{SkewMargin: p.skew}})
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
	after                         string
	limit                         int
	left, json                    bool
}

func (f *jobsFlags) register(fs *flag.FlagSet) {
	fs.Int64Var(&f.id, "id", 0, "show this job's timeline: attempts, evidence, ledger row, audit, approval requests")
	fs.StringVar(&f.state, "state", "", "only jobs in this state; manual_review alone shows the operators' queue, oldest first, with ages")
	fs.StringVar(&f.key, "key", "", "only the job of this operation key")
	fs.StringVar(&f.payment, "payment", "", "only the jobs of this payment reference")
	fs.StringVar(&f.refundID, "refund-id", "", "only the jobs with this provider refund id")
	fs.BoolVar(&f.left, "left", false, "the jobs that left manual review, newest first, and why (an operator's resolution, or new evidence)")
	fs.IntVar(&f.limit, "limit", operator.DefaultLimit, fmt.Sprintf("at most this many lines (1 to %d)", operator.MaxLimit))
	fs.StringVar(&f.after, "after", "", "the next page: the cursor the previous page printed")
	fs.BoolVar(&f.json, "json", false, "print JSON instead of a table")
}

// jobs lists jobs (a search, the manual review queue, or the jobs that left
// it), or shows one job's timeline. Output is deterministic: the same data
// prints the same bytes.
func jobs(ctx context.Context, dsn string, f jobsFlags, out io.Writer) error {
	if f.limit < 1 || f.limit > operator.MaxLimit {
		return fmt.Errorf("jobs: -limit %d: must be between 1 and %d", f.limit, operator.MaxLimit)
	}
	ops, done, err := openOperator(dsn, providerFlags{})
	if err != nil {
		return fmt.Errorf("jobs: %w", err)
	}
	defer done()
	page := operator.Page{Limit: f.limit, After: f.after}
	q := operator.Query{State: f.state, OperationKey: f.key, PaymentRef: f.payment, ProviderRefundID: f.refundID}
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
		p, err := ops.Queue(ctx, page)
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

// flagged rewrites an operator.InputError to name the CLI's flag.
func flagged(err error) error {
	var in *operator.InputError
	if errors.As(err, &in) {
		return fmt.Errorf("-%s: %s", in.Field, in.Problem)
	}
	return err
}

const tf = operator.TimeFormat

func next(j operator.JobSummary) string {
	switch {
	case j.NextRunAt != nil:
		return j.NextAction + " due " + j.NextRunAt.Format(tf)
	case j.State == "running":
		return j.NextAction + " (leased)"
	}
	return "-"
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func printJobs(out io.Writer, p operator.JobsPage) error {
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tOPERATION KEY\tPAYMENT\tAMOUNT\tSTATE\tATTEMPT\tNEXT\tPROVIDER REFUND\tREASON")
	for _, j := range p.Jobs {
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%d\t%s\t%s\t%s\n", j.ID, term.Inert(j.OperationKey), term.Inert(j.PaymentRef), term.Inert(j.Amount.String()), j.State, j.Attempt, next(j),
			orDash(term.Inert(j.ProviderRefundID)), orDash(term.Inert(j.Reason)))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	return printNext(out, len(p.Jobs), p.Next)
}

func printQueue(out io.Writer, p operator.QueuePage) error {
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tOPERATION KEY\tPAYMENT\tAMOUNT\tIN REVIEW SINCE\tAGE\tATTEMPT\tREASON")
	for _, it := range p.Items {
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%d\t%s\n", it.ID, term.Inert(it.OperationKey), term.Inert(it.PaymentRef), term.Inert(it.Amount.String()), it.Since.Format(tf),
			it.Age.Truncate(time.Second), it.Attempt, orDash(term.Inert(it.Reason)))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	return printNext(out, len(p.Items), p.Next)
}

func printDepartures(out io.Writer, p operator.DeparturesPage) error {
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "LEFT AT\tID\tOPERATION KEY\tBY\tACTION\tNOW\tWHY")
	for _, d := range p.Departures {
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s@%d\t%s\n", d.At.Format(tf), d.JobID, term.Inert(d.OperationKey), term.Inert(d.Operator), d.Action, d.StateAfter, d.AttemptAfter, term.Inert(d.Why))
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

// printJob prints one job: the row, then its timeline, evidence, audit and
// approval requests, each in the view's deterministic order.
func printJob(out io.Writer, v *operator.JobView) error {
	w := &errWriter{w: out}
	w.printf("job %d  %s  %s at attempt %d\n", v.ID, term.Inert(v.OperationKey), v.State, v.Attempt)
	w.printf("  request      payment %s, %s\n", term.Inert(v.PaymentRef), term.Inert(v.Amount.String()))
	w.printf("  next         %s\n", next(v.JobSummary))
	w.printf("  provider id  %s\n", orDash(term.Inert(v.ProviderRefundID)))
	if v.LeaseUntil != nil && v.State == "running" {
		w.printf("  lease until  %s\n", v.LeaseUntil.Format(tf))
	}
	if v.KeyFirstUsedAt != nil {
		w.printf("  key sent     first %s, last %s\n", v.KeyFirstUsedAt.Format(tf), v.LastSendAt.Format(tf))
	}
	for _, f := range []struct{ label, v string }{{"last error", v.LastError}, {"review", v.ReviewReason}, {"evidence", v.ReviewEvidence}} {
		if f.v != "" {
			lines := strings.Split(f.v, "\n")
			for i := range lines {
				lines[i] = term.Inert(lines[i])
			}
			w.printf("  %-12s %s\n", f.label, strings.Join(lines, "\n               "))
		}
	}
	if v.Ledger != nil {
		w.printf("  ledger       %s %s\n", v.Ledger.Status, term.Inert(v.Ledger.ProviderRefundID))
	} else {
		w.printf("  ledger       none\n")
	}
	w.printf("timeline\n")
	for _, e := range v.Timeline {
		at := e.At.Format(tf)
		if e.Kind == operator.EventNow {
			at = "now" + strings.Repeat(" ", len(tf)-3)
		}
		attempt := ""
		if e.Attempt != 0 {
			attempt = fmt.Sprintf("@%d", e.Attempt)
		}
		w.printf("  %s  %-8s %-4s %s\n", at, e.Kind, attempt, term.Inert(e.Text))
	}
	w.printf("attempts (%d)\n", len(v.Attempts))
	for _, a := range v.Attempts {
		// Which process (or operator) held the attempt, from the attempts
		// log; "-" for an attempt taken before the log existed.
		held := fmt.Sprintf("%-10s %s", orDash(a.Op), orDash(term.Inert(a.Holder)))
		if a.ClaimedAt != nil {
			held += " at " + a.ClaimedAt.Format(tf)
		}
		if a.LeaseUntil != nil {
			held += ", lease until " + a.LeaseUntil.Format(tf)
		}
		w.printf("  @%d %s; %s, evidence %v\n", a.Attempt, held, term.Inert(a.StartedBy), a.Evidence)
	}
	w.printf("evidence (%d)\n", len(v.Evidence))
	for _, e := range v.Evidence {
		processed := "unprocessed"
		if e.ProcessedAt != nil {
			processed = "processed"
		}
		w.printf("  #%d %s %s %s %s attempt=%d %s: %s\n", e.ID, e.ReceivedAt.Format(tf), e.Source, e.Status, orDash(term.Inert(e.ProviderRefundID)), e.Attempt, processed, oneLine(e.Payload))
	}
	w.printf("audit (%d)\n", len(v.Audit))
	for _, a := range v.Audit {
		by := term.Inert(a.Operator)
		if a.RequestedBy != "" {
			by += fmt.Sprintf(" (approving request %d of %s)", a.ApprovalID, term.Inert(a.RequestedBy))
		}
		override := ""
		if a.Override {
			override = " OVERRIDE"
		}
		w.printf("  #%d %s %s %s by %s%s: %s@%d -> %s@%d %s: %s\n", a.ID, a.RecordedAt.Format(tf), a.Action, a.Outcome, by, override,
			a.StateBefore, a.AttemptBefore, a.StateAfter, a.AttemptAfter, orDash(term.Inert(a.RefundID)), oneLine(a.Reason))
	}
	if len(v.Approvals) > 0 {
		w.printf("approval requests (%d)\n", len(v.Approvals))
		for _, a := range v.Approvals {
			w.printf("  %s\n", approvalLine(a))
		}
	}
	return w.err
}

func approvalLine(a operator.Approval) string {
	s := fmt.Sprintf("request %d: job %d as %s", a.ID, a.JobID, a.As)
	if a.RefundID != "" {
		s += " " + a.RefundID
	}
	if a.Override {
		s += " (override)"
	}
	s += fmt.Sprintf(" at attempt %d, by %s at %s: %s", a.SeenAttempt, a.RequestedBy, a.RequestedAt.Format(tf), a.Status)
	if a.DecidedBy != "" {
		s += " by " + a.DecidedBy
	}
	return s + ": " + oneLine(a.Reason)
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
	override             bool
	provider             providerFlags
}

func (f *resolveFlags) register(fs *flag.FlagSet) {
	fs.Int64Var(&f.id, "id", 0, "the job in manual review (required)")
	fs.StringVar(&f.as, "as", "", "succeeded (with -refund-id, verified with the provider), reconcile, or refund (send again with the same key: needs a second operator's approval)")
	fs.StringVar(&f.reason, "reason", "", "why (required): recorded in the audit and added to the job's evidence")
	fs.StringVar(&f.refundID, "refund-id", "", "the provider's refund id, with -as succeeded")
	fs.StringVar(&f.operator, "operator", loginName(), "who decides (default: the login name)")
	fs.BoolVar(&f.override, "override", false, "with -as succeeded: settle although the refund id does not verify; files a request a second operator must approve")
	fs.Int64Var(&f.attempt, "attempt", 0, "the attempt you saw the job at (default: the job's attempt now, printed); the resolution is fenced on it")
	f.provider.register(fs)
}

// resolve is an operator's resolution of a job in manual review, through
// package operator: verified, audited, fenced on the attempt seen. A resend
// or an override files an approval request instead.
func resolve(ctx context.Context, dsn string, f resolveFlags, out io.Writer) error {
	switch {
	case f.id <= 0:
		return fmt.Errorf("resolve: -id %d: must be the id of a job in manual review", f.id)
	case f.as == "":
		return errors.New("resolve: -as is required: succeeded, reconcile or refund")
	case strings.TrimSpace(f.reason) == "":
		return errors.New("resolve: -reason is required: say why")
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
		fmt.Fprintf(out, "resolve: job %d is %s at attempt %d\n", v.ID, v.State, v.Attempt)
	}
	r := operator.Resolution{JobID: f.id, As: operator.Action(f.as), RefundID: f.refundID, Reason: f.reason, Operator: f.operator,
		SeenAttempt: seen, Override: f.override}
	if r.As == operator.AsRefund || r.Override {
		a, err := ops.RequestApproval(ctx, r)
		if err != nil {
			return fmt.Errorf("resolve: %w", flagged(err))
		}
		fmt.Fprintf(out, "resolve: %s needs a second operator: filed %s\n  approve with: refundd approve -id %d -operator NAME\n", f.as, approvalLine(a), a.ID)
		return nil
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
	list     bool
	provider providerFlags
}

func (f *approveFlags) register(fs *flag.FlagSet) {
	fs.Int64Var(&f.id, "id", 0, "the approval request (refundd resolve prints it; -list shows the pending ones)")
	fs.StringVar(&f.operator, "operator", loginName(), "who approves: never the requester (default: the login name)")
	fs.BoolVar(&f.decline, "decline", false, "decline the request instead (with -reason); the requester may withdraw it")
	fs.StringVar(&f.reason, "reason", "", "why, with -decline")
	fs.BoolVar(&f.list, "list", false, "list the pending approval requests, oldest first")
	f.provider.register(fs)
}

// approve carries out (or declines) an approval request as a second
// operator, or lists the pending ones.
func approve(ctx context.Context, dsn string, f approveFlags, out io.Writer) error {
	if !f.list && f.id <= 0 {
		return fmt.Errorf("approve: -id %d: must be an approval request id (see refundd approve -list)", f.id)
	}
	ops, done, err := openOperator(dsn, f.provider)
	if err != nil {
		return fmt.Errorf("approve: %w", err)
	}
	defer done()
	switch {
	case f.list:
		p, err := ops.Approvals(ctx, true, operator.Page{Limit: operator.MaxLimit})
		if err != nil {
			return fmt.Errorf("approve: %w", err)
		}
		for _, a := range p.Approvals {
			fmt.Fprintln(out, approvalLine(a))
		}
		fmt.Fprintf(out, "%d pending\n", len(p.Approvals))
		return nil
	case f.decline:
		a, err := ops.Decline(ctx, f.id, f.operator, f.reason)
		if err != nil {
			return fmt.Errorf("approve: %w", flagged(err))
		}
		fmt.Fprintf(out, "approve: declined %s\n", approvalLine(a))
		return nil
	}
	res, err := ops.Approve(ctx, f.id, f.operator)
	if err != nil {
		return fmt.Errorf("approve: %w", flagged(err))
	}
	fmt.Fprintf(out, "approve: request %d approved by %s: job %d %s at attempt %d (audit #%d)\n", res.RequestID, f.operator, res.JobID, res.State, res.Attempt, res.AuditID)
	return nil
}

// oneLine is s on one line, inert in a terminal, at most 120 bytes.
func oneLine(s string) string {
	s = term.Inert(strings.Join(strings.Fields(s), " "))
	if len(s) > 120 {
		s = s[:117] + "..."
	}
	return s
}
