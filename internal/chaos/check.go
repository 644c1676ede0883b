package chaos

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/fencekit/fencekit/ent"
	"github.com/fencekit/fencekit/internal/history"
	"github.com/fencekit/fencekit/internal/scratchdb"
	"github.com/fencekit/fencekit/provider"
)

// check reads what happened, from the histories, the database and the fake
// provider, and checks it.
func (r *chaosRun) check(ctx context.Context) (Summary, error) {
	s := Summary{Seed: r.f.Seed, Dispatch: r.f.Dispatch, Provider: r.f.Provider, Jobs: r.f.Jobs, Processes: r.f.Workers, Incarnations: r.incarn, History: r.dir}
	if r.broker != nil {
		r.broker.mu.Lock()
		s.BrokerPublished = r.broker.published
		r.broker.mu.Unlock()
	}
	if r.kafka != nil {
		r.kafka.mu.Lock()
		s.BrokerPublished = r.kafka.published
		r.kafka.mu.Unlock()
	}
	c, err := scratchdb.OpenClient(r.dsn)
	if err != nil {
		return s, err
	}
	defer c.Close()
	jobs, err := c.RefundJob.Query().All(ctx)
	if err != nil {
		return s, err
	}
	final := map[int64]history.Final{}
	byKey := map[string]*ent.RefundJob{}
	for _, j := range jobs {
		final[j.ID] = history.Final{State: string(j.State), Attempt: j.Attempt}
		byKey[j.OperationKey] = j
		switch j.State {
		case "succeeded":
			s.Succeeded++
		case "failed":
			s.Failed++
		case "manual_review":
			s.ManualReview++
		default:
			s.Unfinished++
		}
		if j.KeyFirstUsedAt != nil && j.UpdatedAt.Sub(*j.KeyFirstUsedAt) > chaosKeyRetention {
			r.count(faultKeyExpired, 1)
		}
	}
	events, err := history.Load(r.dir)
	if err != nil {
		return s, err
	}
	rep := history.Check(events, final, 5*time.Minute)
	s.HistoryOps, s.HistoryUnknown = rep.Ops, rep.Unknown
	s.TerminalRegressions, s.AttemptRegressions = rep.TerminalRegressions, rep.AttemptRegressions
	s.HistoryCheck = rep.Summary()
	s.ZombieWriteBacks = history.Zombies(events)
	if !rep.OK {
		var b strings.Builder
		for _, fl := range rep.Failures {
			fmt.Fprintf(&b, "%s\n\n", fl.Explanation)
		}
		_ = os.WriteFile(filepath.Join(r.dir, "explanation.txt"), []byte(b.String()), 0o644)
		_ = rep.WriteVisualization(filepath.Join(r.dir, "history.html"))
	}

	// What the fleet did, from the history.
	writes := map[[2]int64]history.Event{} // job, attempt → the write-back's return
	for _, e := range events {
		if e.Phase != history.PhaseReturn {
			continue
		}
		switch {
		case e.Op == history.OpTakeover && e.Result == history.ResultOK:
			s.Takeovers++
		case e.Op == history.OpWrite && e.Result == history.ResultSuperseded:
			s.StaleWritesRejected++
		}
		if e.Result == history.ResultUnknown && e.Op != history.OpProvider {
			s.CommitUnknown++
		}
		if e.Op == history.OpWrite {
			writes[[2]int64{e.Job, e.Attempt}] = e
		}
	}

	// The observation log.
	// The observation log: what it knows of each key (the same evidence is
	// one row, whichever attempt recorded it first).
	known := map[string]bool{} // key, provider refund id, status
	dedup := map[string]bool{}
	rows, err := r.lockDB.QueryContext(ctx, "SELECT operation_key, COALESCE(provider_refund_id, ''), provider_status, dedup_key FROM refund_observations")
	if err != nil {
		return s, err
	}
	for rows.Next() {
		var key, refundID, status, dk string
		if err := rows.Scan(&key, &refundID, &status, &dk); err != nil {
			rows.Close()
			return s, err
		}
		known[key+" "+refundID+" "+status] = true
		dedup[dk] = true
	}
	rows.Close()
	var problems []string
	// Every answer whose write-back did not land is in the log.
	for _, e := range events {
		if e.Op != history.OpProvider || e.Phase != history.PhaseReturn {
			continue
		}
		wb, ok := writes[[2]int64{e.Job, e.Attempt}]
		if !ok || wb.Result == history.ResultOK || wb.Result == history.ResultAlreadySettled {
			continue
		}
		for _, a := range evidenceOf(e.Key, e.Detail) {
			if !known[e.Key+" "+a] {
				s.LostReceipts++
				problems = append(problems, fmt.Sprintf("job %d attempt %d: the provider answered %q, the write-back was %s, and the answer is not in the observation log", e.Job, e.Attempt, e.Detail, wb.Result))
			}
		}
	}
	// Every webhook a process acknowledged is in the log.
	for _, d := range r.srv.WebhookDeliveries() {
		// Events about a refund are recorded; one about a payment as a
		// whole (Stripe's charge.refunded) names no operation key to file
		// it under.
		if d.Status >= 200 && d.Status < 300 && strings.HasPrefix(string(d.Type), "refund.") && !dedup["event:webhook:"+d.EventID] {
			s.LostReceipts++
			problems = append(problems, fmt.Sprintf("webhook %s (%s of %s) was acknowledged but is not in the observation log", d.EventID, d.Type, d.Key))
		}
	}
	// Executions at the provider, and the ledger.
	ledgers, err := c.Refund.Query().All(ctx)
	if err != nil {
		return s, err
	}
	ledgerOf := map[string]*ent.Refund{}
	for _, l := range ledgers {
		ledgerOf[l.OperationKey] = l
	}
	lookups := r.client()
	for key, j := range byKey {
		n := r.srv.Executions(key)
		s.ProviderExecuted += n
		if n > 1 {
			s.KeysPaidTwice++
			problems = append(problems, fmt.Sprintf("%s was executed %d times by the provider", key, n))
		}
		if n > 0 {
			req, _ := r.request(key)
			found, err := lookups.Lookup(ctx, provider.Query{OperationKey: key, PaymentRef: req.PaymentRef})
			if err != nil {
				return s, fmt.Errorf("chaos: look up %s: %w", key, err)
			}
			for _, fr := range found {
				if fr.Status != provider.StatusSucceeded {
					continue
				}
				ok := j.State == "succeeded" && j.ProviderRefundID != nil && *j.ProviderRefundID == fr.ProviderRefundID ||
					j.State == "manual_review" && (j.ReviewEvidence != nil && *j.ReviewEvidence != "" || known[key+" "+fr.ProviderRefundID+" succeeded"])
				if !ok {
					s.LostReceipts++
					problems = append(problems, fmt.Sprintf("%s: the provider executed refund %s, but job %d is %s", key, fr.ProviderRefundID, j.ID, j.State))
				}
			}
		}
		want := map[string]string{"succeeded": "refunded", "failed": "failed"}[string(j.State)]
		if want == "" {
			want = "requested"
		}
		if l := ledgerOf[key]; l == nil || string(l.Status) != want {
			s.LedgerMismatches++
			problems = append(problems, fmt.Sprintf("%s: job %d is %s but its ledger row is not %s", key, j.ID, j.State, want))
		}
	}
	inj := r.srv.Injected()
	r.count(faultProviderLostReply, inj.Cut)
	r.count(faultProviderLateReply, inj.Latency)
	r.count(faultProviderRateLimit, inj.RateLimit)
	r.count(faultProviderError, inj.ServerError)
	r.count(faultProviderLookupLag, inj.LookupLag)
	r.count(faultPendingThenFails, inj.Declined)
	r.count(faultPendingThenSucceed, inj.Pending-inj.Declined)
	r.count(faultReversal, inj.Reversal)
	r.count(faultWebhookDuplicate, inj.WebhookDuplicate)
	r.count(faultWebhookLate, inj.WebhookLate)
	r.faultMu.Lock()
	s.FaultsByKind = r.faults
	for _, n := range r.faults {
		s.FaultsInjected += n
	}
	r.faultMu.Unlock()
	if len(problems) > 0 {
		sort.Strings(problems)
		_ = os.WriteFile(filepath.Join(r.dir, "invariants.txt"), []byte(strings.Join(problems, "\n")+"\n"), 0o644)
	}
	return s, nil
}

// evidenceOf lists, as "refund-id status", what a provider answer to key's
// job carries that the worker keeps as evidence when its write-back does not
// land: the status of a send ("succeeded re_1"), or each refund of key a
// lookup found ("found 1 [key succeeded re_1]").
func evidenceOf(key, detail string) []string {
	statuses := map[string]bool{"succeeded": true, "pending": true, "rejected": true, "reversed": true}
	if rest, ok := strings.CutPrefix(detail, "found "); ok {
		_, list, _ := strings.Cut(rest, "[")
		var out []string
		for _, item := range strings.Split(strings.TrimSuffix(list, "]"), ", ") {
			f := strings.Fields(item)
			if len(f) == 3 && f[0] == key && statuses[f[1]] {
				out = append(out, f[2]+" "+f[1])
			}
		}
		return out
	}
	if f := strings.Fields(detail); len(f) == 2 && statuses[f[0]] {
		return []string{f[1] + " " + f[0]}
	}
	return nil
}

// ErrInconclusive is report's error for a run that did not exercise a zombie
// write-back of every kind, alone and in a batch: its checks, passed or not,
// prove nothing about the fence there.
var ErrInconclusive = errors.New("inconclusive")

// report prints the summary and fails when a check did, or when the run was
// inconclusive (ErrInconclusive).
func (r *chaosRun) report(s Summary, out io.Writer) error {
	var failed []string
	for _, c := range []struct {
		n    int
		what string
	}{
		{s.KeysPaidTwice, "operation keys paid twice"},
		{s.TerminalRegressions, "terminal states left"},
		{s.AttemptRegressions, "attempts not strictly increasing"},
		{s.LostReceipts, "receipts lost"},
		{s.LedgerMismatches, "ledger rows parted from their job"},
		{s.Unfinished, "jobs unfinished"},
	} {
		if c.n > 0 {
			failed = append(failed, fmt.Sprintf("%d %s", c.n, c.what))
		}
	}
	if s.HistoryCheck != "ok" {
		failed = append(failed, "history check: "+s.HistoryCheck)
	}
	if b, err := os.ReadFile(filepath.Join(r.dir, "explanation.txt")); err == nil {
		fmt.Fprintf(out, "the history is not one the state machine allows:\n%s", b)
	}
	if b, err := os.ReadFile(filepath.Join(r.dir, "invariants.txt")); err == nil {
		fmt.Fprintf(out, "invariants broken:\n%s", b)
	}
	// The directory stays when asked (-history, -keep-history) or when
	// the run failed or was inconclusive; say where.
	var inconclusive error
	if missing := s.ZombieWriteBacks.Missing(); len(missing) > 0 {
		inconclusive = fmt.Errorf("%w: no zombie write-back (sent after another worker's takeover committed) was refused by the fence for %s",
			ErrInconclusive, strings.Join(missing, ", "))
	}
	keep := r.f.Dir != "" || r.f.KeepHistory || len(failed) > 0 || inconclusive != nil
	if keep {
		fmt.Fprintf(out, "chaos: the histories and logs are kept in %s\n", r.dir)
	}
	if r.f.JSON {
		b, err := json.Marshal(s)
		if err != nil {
			return err
		}
		fmt.Fprintln(out, string(b))
	} else {
		kinds := make([]string, 0, len(s.FaultsByKind))
		for k := range s.FaultsByKind {
			kinds = append(kinds, k)
		}
		sort.Strings(kinds)
		fmt.Fprintf(out, "chaos: %d jobs in %.0fs, %d processes (%d incarnations)\n", s.Jobs, s.Seconds, s.Processes, s.Incarnations)
		fmt.Fprintf(out, "  fault phase %.1fs (up to %v asked; it ended when %s)\n", s.FaultPhaseSeconds, r.f.Duration, s.FaultPhaseEnd)
		fmt.Fprintf(out, "  faults injected %d:\n", s.FaultsInjected)
		for _, k := range kinds {
			fmt.Fprintf(out, "    %-40s %d\n", k, s.FaultsByKind[k])
		}
		fmt.Fprintf(out, "  succeeded %d, failed %d, manual review %d, unfinished %d\n", s.Succeeded, s.Failed, s.ManualReview, s.Unfinished)
		fmt.Fprintf(out, "  takeovers %d, stale writes rejected %d, outcomes unknown %d\n", s.Takeovers, s.StaleWritesRejected, s.CommitUnknown)
		z := s.ZombieWriteBacks
		fmt.Fprintf(out, "  zombie write-backs refused after a takeover (alone/in a batch): complete %d/%d, reschedule %d/%d, manual review %d/%d, fail %d/%d\n",
			z.Complete.Single, z.Complete.Batched, z.Reschedule.Single, z.Reschedule.Batched,
			z.ManualReview.Single, z.ManualReview.Batched, z.Fail.Single, z.Fail.Batched)
		fmt.Fprintf(out, "  provider executions %d, keys paid twice %d, terminal regressions %d, lost receipts %d, ledger mismatches %d\n",
			s.ProviderExecuted, s.KeysPaidTwice, s.TerminalRegressions, s.LostReceipts, s.LedgerMismatches)
		fmt.Fprintf(out, "  history: %d operations (%d unknown): %s\n", s.HistoryOps, s.HistoryUnknown, s.HistoryCheck)
	}
	// A run that never made a zombie write-back reach the fence says
	// nothing about the fence, however clean its checks (inconclusive).
	switch {
	case len(failed) > 0 && inconclusive != nil:
		return fmt.Errorf("chaos (seed %d, history in %s): %s; %w", s.Seed, r.dir, strings.Join(failed, "; "), inconclusive)
	case len(failed) > 0:
		return fmt.Errorf("chaos (seed %d, history in %s): %s", s.Seed, r.dir, strings.Join(failed, "; "))
	case inconclusive != nil:
		return fmt.Errorf("chaos (seed %d, history in %s): %w", s.Seed, r.dir, inconclusive)
	}
	if !keep {
		_ = os.RemoveAll(r.dir)
	}
	return nil
}
