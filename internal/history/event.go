package history

// Event is one line of a process's history file.
type Event struct {
	Proc    string `json:"proc"`             // process incarnation, e.g. "w3.2"
	ID      int64  `json:"id"`               // operation id, unique within Proc; a call and its return share it
	Phase   string `json:"phase"`            // PhaseCall or PhaseReturn
	T       int64  `json:"t"`                // wall clock, Unix nanoseconds (all processes run on one machine)
	Op      string `json:"op"`               // OpClaim, OpTakeover, OpResolve, OpProvider or OpWrite
	Job     int64  `json:"job"`              // the job's id
	Attempt int64  `json:"attempt"`          // claim/takeover/resolve: the attempt the job moves to; provider/write: the lease's attempt
	To      string `json:"to,omitempty"`     // write: the target state
	Key     string `json:"key,omitempty"`    // the operation key
	Detail  string `json:"detail,omitempty"` // provider: the call kind on call (send|resend|reconcile), the answer on return
	Result  string `json:"result,omitempty"` // on return: one of the Result constants
	// Batch, on a write's return, is how many write-backs shared the
	// write's transaction (1: it was alone); 0 when the write-back was
	// applied outside any batch, alone too.
	Batch int `json:"batch,omitempty"`
}

// Phases of an event. A call is written before the operation starts and its
// return after it ends; an operation with no return never finished (the
// process was killed), and its outcome is unknown.
const (
	PhaseCall   = "call"
	PhaseReturn = "return"
)

// Operations. A call names the job, the attempt and, for a write, the target
// state; the checker reads them from the call, and its return must not say
// otherwise.
const (
	OpClaim    = "claim"    // ready@a-1 → running@a
	OpTakeover = "takeover" // running@a-1 → running@a, once the lease expired
	OpProvider = "provider" // a call to the payment provider: shown in explanations, not checked
	OpWrite    = "write"    // the fenced write-back of lease a: running@a → To@a
	OpResolve  = "resolve"  // a resolution of a job in manual review: manual_review@a-1 → ready@a
)

// Results of an operation, on its return event. What each lets the checker
// conclude is what the fenced data layer's outcomes promise
// (fencedwrite/errors.go).
const (
	// ResultOK: the COMMIT was acknowledged; the operation is in place.
	ResultOK = "ok"
	// ResultAlreadySettled: a write found the row already at To@a, made by
	// the same attempt (an earlier COMMIT landed and its reply was lost).
	ResultAlreadySettled = "already_settled"
	// ResultSuperseded: a write's fence did not match, the row was not
	// running@a. A write superseded after its own COMMIT reply was lost
	// (fencedwrite.ErrSuperseded together with ErrCommitUnknown) may have
	// landed first: record it as ResultUnknown.
	ResultSuperseded = "superseded"
	// ResultRefused: a claim or takeover found the job not claimable; a
	// write's fenced UPDATE matched no row. Like superseded, a refused write
	// tells the checker the row was not running@a, so a write that the
	// database's trigger refused while the row was running@a must be
	// recorded as ResultRolledBack.
	ResultRefused = "refused"
	// ResultRolledBack: nothing was written.
	ResultRolledBack = "rolled_back"
	// ResultUnknown: the COMMIT was sent and no answer came back; it may
	// land, or have landed, at any time after the call.
	ResultUnknown = "unknown"
	// ResultError: any other failure. The checker treats it as unknown.
	ResultError = "error"
)

// Final is a job's row as the database holds it at the end of a run.
type Final struct {
	State   string
	Attempt int64
}
