package worker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/fencekit/fencekit/ent"
	"github.com/fencekit/fencekit/ent/refundjob"
	"github.com/fencekit/fencekit/evidence"
	"github.com/fencekit/fencekit/fencedwrite"
	"github.com/fencekit/fencekit/ledger"
	"github.com/fencekit/fencekit/provider"
	"github.com/fencekit/fencekit/worker/internal/budget"
	"github.com/fencekit/fencekit/worker/internal/decide"
)

// writeBackTimeout bounds a write-back, whatever happened to the work's
// context: a job whose provider call was cancelled still writes back.
const writeBackTimeout = 30 * time.Second

// writeBackTries is how many times a write-back that rolled back is tried
// (the lease still holds) before the job is left to its lease's expiry and
// a takeover's reconcile.
const writeBackTries = 3

// run works one claimed job: one provider call, no transaction and no
// connection held, then one fenced write-back.
func (c *Client) run(l *ent.RefundJobLease) {
	defer func() {
		c.inflight.Add(-1)
		c.jobs.Done()
		c.Wake() // a slot is free
	}()
	req := l.Request()
	job := jobOf(l)
	log := c.log.With("operation_key", job.OperationKey, "attempt", job.Attempt, "job_id", job.ID)
	in := decide.Input{
		Action:           decide.Action(l.NextAction()),
		Request:          provider.RefundRequest{OperationKey: req.OperationKey, PaymentRef: req.PaymentRef, AmountMinor: req.AmountMinor, Currency: req.Currency},
		Caps:             c.cfg.Provider.Capabilities(),
		Now:              l.ClaimedAt(),
		KeyFirstUsedAt:   l.KeyFirstUsedAt(),
		LastSendAt:       l.LastSendAt(),
		KeyWindow:        c.opts.WithDefaults().KeyWindow(),
		ProviderRefundID: l.ProviderRefundID(),
		Delays:           decide.Delays{Pending: c.cfg.PendingDelay, Retry: c.cfg.RetryDelay, LagPoll: c.cfg.LagPoll},
	}
	if c.hooks.BeforeProviderCall != nil {
		c.hooks.BeforeProviderCall(job)
	}
	c.call(l, &in, log)
	if c.hooks.AfterProviderCall != nil {
		job.Answer = answerOf(in)
		c.hooks.AfterProviderCall(job)
	}
	d := decide.Decide(in)
	err := c.writeBack(l, &job, in, d, log)
	if c.hooks.WroteBack != nil {
		c.hooks.WroteBack(job, err)
	}
}

// call makes the job's one provider call and fills in its outcome.
func (c *Client) call(l *ent.RefundJobLease, in *decide.Input, log *slog.Logger) {
	ctx, cancel := context.WithTimeout(c.workCtx, c.cfg.ProviderTimeout)
	defer cancel()
	switch in.Action {
	case decide.Refund:
		kind := CallSend
		if l.Resend() {
			kind = CallResend
		}
		c.m.ProviderCall(kind)
		in.Sent, in.SendErr = c.cfg.Provider.Refund(ctx, in.Request)
		log.Info("provider call", "kind", kind, "status", in.Sent.Status, "provider_refund_id", in.Sent.ProviderRefundID, "err", in.SendErr)
	default:
		// Read the observation log before the lookup, so that "not found"
		// is decided only after the evidence was read.
		entries, err := evidence.ForKey(ctx, c.ent, in.Request.OperationKey)
		if err != nil {
			in.LookupErr = fmt.Errorf("read the observation log: %w: %w", provider.ErrOutcomeUnknown, err)
			log.Warn("reconcile: read evidence", "err", err)
			return
		}
		in.Evidence = entries
		// The question is the operation key (by reference, and the
		// payment's refunds). A refund id, the job's or else the latest
		// the log holds, is asked only when those find nothing: one an
		// unverified source names is evidence, never the question.
		q := provider.Query{OperationKey: in.Request.OperationKey, PaymentRef: in.Request.PaymentRef, ProviderRefundID: in.ProviderRefundID}
		for i := len(entries) - 1; i >= 0 && q.ProviderRefundID == ""; i-- {
			q.ProviderRefundID = entries[i].ProviderRefundID
		}
		c.m.ProviderCall(CallReconcile)
		in.Found, in.LookupErr = c.cfg.Provider.Lookup(ctx, q)
		log.Info("provider call", "kind", CallReconcile, "found", len(in.Found), "err", in.LookupErr)
	}
}

// transition turns a decision into the fenced write and the business write
// that goes with it.
func transition(l *ent.RefundJobLease, d decide.Decision) (*ent.RefundJobTransition, func(context.Context, *ent.Tx) error) {
	key := l.Request().OperationKey
	switch d.Kind {
	case decide.Complete:
		return l.Complete(d.ProviderRefundID), ledger.Refunded(key, d.ProviderRefundID)
	case decide.Fail:
		return l.Fail(d.Reason, d.ProviderRefundID), ledger.Failed(key)
	case decide.ManualReview:
		return l.ManualReview(d.Reason, d.Evidence, d.ProviderRefundID), nil
	default:
		return l.Reschedule(refundjob.NextAction(d.NextAction), d.After, d.ProviderRefundID, d.Reason), nil
	}
}

// writeBack applies the decision through the fence. A write-back that did
// not land keeps what the provider said as evidence.
func (c *Client) writeBack(l *ent.RefundJobLease, job *Job, in decide.Input, d decide.Decision, log *slog.Logger) error {
	tr, fn := transition(l, d)
	provCall := callOf(l, in)
	fn = withCall(provCall, fn)
	job.Transition, job.To = tr.Op(), string(tr.To())
	if c.hooks.BeforeWriteBack != nil {
		c.hooks.BeforeWriteBack(*job)
	}
	if h := c.hooks.BeforeBusinessWrite; h != nil {
		then, j := fn, *job
		fn = func(ctx context.Context, tx *ent.Tx) error {
			h(ctx, j)
			if then == nil {
				return nil
			}
			return then(ctx, tx)
		}
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(c.workCtx), writeBackTimeout)
	defer cancel()
	if c.hooks.WriteBackContext != nil {
		ctx = c.hooks.WriteBackContext(ctx, *job)
	}
	if in.Action == decide.Refund && errors.Is(in.SendErr, provider.ErrAlreadyRefunded) {
		// "Already refunded" (or "exceeds the refundable amount") to a send
		// that may follow an executed one is evidence, not a failure
		// (DESIGN.md); it goes into the observation log, where a later
		// reconcile that finds nothing reads it and hands the job to an
		// operator instead of resending: without it, a payment refunded
		// outside fencekit made the job send, be told so, look, find
		// nothing and send again until its key's window closed.
		o := evidence.Observation{OperationKey: in.Request.OperationKey, JobID: l.ID(), Attempt: l.Attempt(), Source: evidence.ProviderResponse,
			Status: evidence.Conflict, Payload: []byte(cut(in.SendErr.Error(), maxCallDetail))}
		if _, _, err := c.record(ctx, o, log); err != nil {
			log.Error("record the already-refunded answer: given up", "err", err)
		}
	}
	log = log.With("transition", tr.Op(), "rule", d.Rule)
	if d.Alert != "" {
		c.m.Alert(d.Alert)
		log.Warn("alert", "alert", d.Alert, "provider_refund_id", d.ProviderRefundID)
	}
	batched := c.cfg.WriteBackBatch > 1 && c.hooks.WriteBackContext == nil
	var err error
	for try := 1; try <= writeBackTries; try++ {
		if batched {
			err = c.applyBatched(ctx, *job, tr, fn)
		} else {
			err = c.ent.RefundJob.Apply(ctx, tr, fn)
		}
		if !errors.Is(err, fencedwrite.ErrRolledBack) || errors.Is(err, fencedwrite.ErrInvalid) {
			break
		}
		log.Warn("write-back rolled back; the lease still holds, trying again", "try", try, "err", err)
	}
	if refusedForGood(err, l.Attempt()) && d.Kind != decide.ManualReview {
		// The write-back was refused, not outraced: the same write would be
		// refused at every takeover, and the job would loop through
		// reconciles for ever with the provider's answer unrecorded. An
		// operator decides instead, told why.
		log.Error("write-back refused; moving the job to manual review", "err", err)
		// The provider's answer is kept, and marked processed in the same
		// transaction: it is what the operator reads, not news that would
		// wake the job out of review only to be refused again.
		ids := c.recordAnswers(ctx, l, in, log)
		d = decide.Decision{Kind: decide.ManualReview, ProviderRefundID: d.ProviderRefundID, Rule: d.Rule,
			Reason: fmt.Sprintf("the worker could not record the provider's answer (%s): %v", tr.Op(), err),
			Evidence: fmt.Sprintf("the worker decided to %s (rule %q) and the write was refused; what the provider said is in the observation log (observations %v). %s",
				tr.Op(), d.Rule, ids, d.Evidence)}
		// Two writes, each told to the hooks: the refused one ends here,
		// the move to manual review begins.
		if c.hooks.WroteBack != nil {
			c.hooks.WroteBack(*job, err)
		}
		tr, _ = transition(l, d)
		job.Transition, job.To = tr.Op(), string(tr.To())
		if c.hooks.BeforeWriteBack != nil {
			c.hooks.BeforeWriteBack(*job)
		}
		err = c.ent.RefundJob.Apply(ctx, tr, withCall(provCall, func(ctx context.Context, tx *ent.Tx) error {
			for _, id := range ids {
				if err := evidence.MarkProcessed(ctx, tx, id); err != nil && !errors.Is(err, evidence.ErrAlreadyProcessed) {
					return err
				}
			}
			return nil
		}))
	}
	switch {
	case err == nil, errors.Is(err, fencedwrite.ErrAlreadySettled):
		c.m.Transition(tr.Op())
		if d.Kind == decide.ManualReview {
			c.m.ManualReview()
		}
		log.Info("wrote back", "next_action", d.NextAction, "after", d.After, "provider_refund_id", d.ProviderRefundID, "reason", d.Reason)
		return err
	case errors.Is(err, fencedwrite.ErrSuperseded):
		// Another claim holds the job now: what the provider told us is
		// evidence, not garbage. The current holder or the reconciler acts
		// on it through the fence.
		c.m.StaleWrite(tr.Op())
		log.Warn("write-back superseded by a newer attempt: keeping the answer as evidence", "err", err)
	default:
		log.Error("write-back did not land: keeping the answer as evidence", "err", err)
	}
	c.keepAnswer(ctx, l, in, log)
	return err
}

// refusedForGood reports whether a write-back at attempt was refused in a
// way that trying it again cannot change while the job still waits for it:
// its business write refused (ErrInvalid), or the database refused the
// job's write while the fresh re-read found the job still running at this
// attempt (ErrUnexpectedState with that row; a row found otherwise was
// moved by someone, and is theirs to settle).
func refusedForGood(err error, attempt int64) bool {
	switch {
	case err == nil, errors.Is(err, fencedwrite.ErrSuperseded), errors.Is(err, fencedwrite.ErrCommitUnknown), errors.Is(err, fencedwrite.ErrAlreadySettled):
		return false
	case errors.Is(err, fencedwrite.ErrInvalid):
		return true
	}
	var we *fencedwrite.WriteError
	return errors.Is(err, fencedwrite.ErrUnexpectedState) && errors.As(err, &we) &&
		we.Found.Found && we.Found.State == fencedwrite.StateRunning && we.Found.Attempt == attempt
}

// answerOf says what the provider answered, for hooks.
func answerOf(in decide.Input) string {
	switch {
	case in.Action == decide.Refund && in.SendErr != nil:
		return "error: " + in.SendErr.Error()
	case in.Action == decide.Refund:
		return fmt.Sprintf("%s %s", in.Sent.Status, in.Sent.ProviderRefundID)
	case in.LookupErr != nil:
		return "error: " + in.LookupErr.Error()
	}
	var b []byte
	for i, r := range in.Found {
		if i > 0 {
			b = append(b, ", "...)
		}
		b = fmt.Appendf(b, "%s %s %s", r.Reference, r.Status, r.ProviderRefundID)
	}
	return fmt.Sprintf("found %d [%s]", len(in.Found), b)
}

// keepAnswer records what the provider answered in the observation log,
// when it answered anything worth keeping.
func (c *Client) keepAnswer(ctx context.Context, l *ent.RefundJobLease, in decide.Input, log *slog.Logger) {
	if len(c.recordAnswers(ctx, l, in, log)) > 0 {
		c.wakeReconciler()
	}
}

// recordAnswers records what the provider answered in the observation
// log and returns the observations' ids.
func (c *Client) recordAnswers(ctx context.Context, l *ent.RefundJobLease, in decide.Input, log *slog.Logger) []int64 {
	var ids []int64
	for _, o := range answers(l, in) {
		id, created, err := c.record(ctx, o, log)
		if err != nil {
			log.Error("record late evidence: given up; a takeover's reconcile asks the provider again", "err", err)
			continue
		}
		if created {
			c.m.Evidence(string(o.Source))
		}
		log.Info("late evidence recorded", "observation", id, "status", o.Status, "provider_refund_id", o.ProviderRefundID)
		ids = append(ids, id)
	}
	return ids
}

// record records o in the observation log, trying again while the database
// cannot be reached (a cut connection, a failover) until ctx ends: the
// answer exists nowhere else once this process forgets it. Recording is
// idempotent (the dedup key), so a try whose reply was lost is harmless.
func (c *Client) record(ctx context.Context, o evidence.Observation, log *slog.Logger) (id int64, created bool, err error) {
	err = retryTransient(ctx, func() error {
		var err error
		id, created, err = evidence.Record(ctx, c.ent, o)
		return err
	}, func(wait time.Duration, err error) {
		log.Warn("record late evidence: the database is unreachable; trying again", "wait", wait, "err", err)
	})
	return id, created, err
}

// retryTransient runs try until it succeeds or fails for good, waiting 50 ms
// after the first transient failure and twice as long after each next one,
// up to a second, and telling retrying before each wait. It gives up when
// ctx ends, with ctx's error and the last try's.
func retryTransient(ctx context.Context, try func() error, retrying func(wait time.Duration, err error)) error {
	for wait := 50 * time.Millisecond; ; wait = min(2*wait, time.Second) {
		err := try()
		if err == nil || !transient(err) {
			return err // done, or refused: trying again changes nothing
		}
		retrying(wait, err)
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("%w (last try: %w)", ctx.Err(), err)
		case <-t.C:
		}
	}
}

// transient reports whether err may go away if the same statement is tried
// again: a lost connection, a lock wait timeout (1205), a deadlock (1213).
// Bad input and the server's other refusals are not.
func transient(err error) bool {
	var refused *mysql.MySQLError
	switch {
	case errors.Is(err, fencedwrite.ErrInvalid), errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded),
		errors.Is(err, budget.ErrSettingsDiffer):
		return false
	case errors.As(err, &refused):
		return refused.Number == 1205 || refused.Number == 1213
	}
	return true
}

// answers turns the provider's answers of a job's call into observations.
func answers(l *ent.RefundJobLease, in decide.Input) []evidence.Observation {
	base := evidence.Observation{OperationKey: in.Request.OperationKey, JobID: l.ID(), Attempt: l.Attempt()}
	var out []evidence.Observation
	add := func(src evidence.Source, r provider.Refund, raw []byte) {
		st, ok := statusOf(r.Status)
		if !ok {
			return
		}
		o := base
		o.Source, o.Status, o.ProviderRefundID, o.Payload = src, st, r.ProviderRefundID, raw
		if len(o.Payload) == 0 {
			o.Payload, _ = json.Marshal(r)
		}
		out = append(out, o)
	}
	switch in.Action {
	case decide.Refund:
		if in.Sent.Status != "" {
			add(evidence.ProviderResponse, in.Sent, in.Sent.Raw)
		}
	default:
		for _, r := range in.Found {
			if r.Reference == in.Request.OperationKey {
				add(evidence.Reconcile, r, r.Raw)
			}
		}
	}
	return out
}

func statusOf(s provider.Status) (evidence.Status, bool) {
	switch s {
	case provider.StatusSucceeded:
		return evidence.Succeeded, true
	case provider.StatusPending:
		return evidence.Pending, true
	case provider.StatusRejected:
		return evidence.Rejected, true
	case provider.StatusReversed:
		return evidence.Reversed, true
	}
	return "", false
}

// writeBackReq is one job's write-back waiting for a batch.
type writeBackReq struct {
	job   Job
	item  ent.RefundJobBatchItem
	reply chan error
}

// applyBatched hands job's write-back to the batcher and waits for its
// outcome.
func (c *Client) applyBatched(ctx context.Context, job Job, tr *ent.RefundJobTransition, fn func(context.Context, *ent.Tx) error) error {
	req := writeBackReq{job: job, item: ent.RefundJobBatchItem{Transition: tr, Then: fn}, reply: make(chan error, 1)}
	select {
	case c.pendingWB <- req:
	case <-ctx.Done():
		return fmt.Errorf("queue write-back: %w: %w", fencedwrite.ErrRolledBack, ctx.Err())
	}
	if c.hooks.WriteBackQueued != nil {
		c.hooks.WriteBackQueued(job)
	}
	return <-req.reply
}

// batchWriteBacks settles the write-backs of jobs that finish together in
// one transaction each batch: whatever is waiting when the previous batch
// committed, up to WriteBackBatch. Nothing is held back to fill a batch.
// WriteBackConns of them run at once, each taking what waits.
func (c *Client) batchWriteBacks() {
	defer c.batcher.Done()
	for first := range c.pendingWB {
		reqs := []writeBackReq{first}
	fill:
		for len(reqs) < c.cfg.WriteBackBatch {
			select {
			case r, ok := <-c.pendingWB:
				if !ok {
					break fill
				}
				reqs = append(reqs, r)
			default:
				break fill
			}
		}
		items := make([]ent.RefundJobBatchItem, len(reqs))
		for i, r := range reqs {
			items[i] = r.item
		}
		ctx, cancel := context.WithTimeout(context.Background(), writeBackTimeout)
		// The ledger rows of a batch settle in one statement per status;
		// the worker's callbacks never read what another one wrote.
		ctx = fencedwrite.WithDeferredRows(ctx)
		if c.hooks.BatchContext != nil {
			jobs := make([]Job, len(reqs))
			for i, r := range reqs {
				jobs[i] = r.job
			}
			ctx = c.hooks.BatchContext(ctx, jobs)
		}
		errs := c.ent.RefundJob.ApplyBatch(ctx, items)
		cancel()
		for i, r := range reqs {
			r.reply <- errs[i]
		}
	}
}
