// Package fencedwrite is the user-facing side of fencekit's fenced data
// layer: the outcomes a fenced write, claim or enqueue can report (errors.go),
// the options and connection settings the fence relies on (ClaimOptions,
// DSN, OpenDB), and the schema annotation (Job) that the fencedwrite/entext
// extension turns into a generated, fenced client.
//
// Services use the generated client (for refund_jobs, package
// github.com/fencekit/fencekit/ent): Claim and Takeover return a lease, a
// lease builds the transitions, and Apply runs a transition with the
// service's own writes in one transaction whose COMMIT it owns. The code that
// generated client calls lives in fencedwrite/fencedrt; it is not for
// services.
//
// Every error the generated client returns matches (errors.Is) exactly one
// outcome sentinel, so callers can switch on it; the documented exception is
// a write superseded after its COMMIT reply was lost, which matches both
// ErrSuperseded and ErrCommitUnknown.
package fencedwrite

// Job states and next actions of the state machine (docs/design.md).
const (
	StateReady        = "ready"
	StateRunning      = "running"
	StateSucceeded    = "succeeded"
	StateManualReview = "manual_review"
	StateFailed       = "failed"

	ActionRefund    = "refund"
	ActionReconcile = "reconcile"
)
