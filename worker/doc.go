// Package worker is fencekit's reference worker: it claims, takes over,
// reconciles and settles refund jobs against a payment provider, through the
// fenced data layer only.
//
// Its shape is River's client: a Config with documented defaults, validated
// by New; Start; Stop (stop claiming, let provider calls in flight finish or
// time out, write back through the fence); StopAndCancel; Stopped. The
// machinery lives under worker/internal: the pure decision from a provider's
// answer to a transition (internal/decide) and the fleet-wide outbound
// budget kept in the database (internal/budget).
//
// A pass of the scheduler claims only what can be sent now: as many jobs as
// there are free slots and outbound budget tokens, unknown outcomes first:
// expired leases (a takeover always reconciles), then due reconciles, then
// due sends, which leave a reserve of the budget to the first two
// (Config.ReconcileReserve), in batches on the scheduler's indexes. Nothing
// is prefetched. Each claimed job is one provider call (a
// send, a resend or a reconcile lookup) with no transaction and no pooled
// connection held, then one fenced write-back. A write-back that lost its
// fence records what the provider said in the observation log (evidence, not
// garbage), and the reconciler acts on evidence: it wakes the jobs it
// concerns so that a holder verifies it with the provider and settles the job
// through the fence. Webhooks take the same path.
//
// Every log line of a job carries its operation_key and attempt.
package worker
