package fencedrt

import (
	"strings"

	"github.com/fencekit/fencekit/fencedwrite"
)

// Op names one statement of a fenced table.
type Op string

// The statements of a fenced table. The transitions (every Op with a
// Transition) are UPDATEs fenced on id, state and attempt.
const (
	OpRead         Op = "read"          // the row's state, attempt and settled columns, by id
	OpReadLocked   Op = "read locked"   // the same, FOR UPDATE
	OpClaimLock    Op = "claim lock"    // the claim's locking read, with the database clock
	OpDue          Op = "due"           // the batch claim's locking read of due ready jobs, oldest first
	OpDueReconcile Op = "due reconcile" // the same, of the due ready jobs whose next action is reconcile
	OpExpired      Op = "expired"       // the batch takeover's locking read of expired leases, oldest first
	OpRegisterKey  Op = "register key"
	OpReadKey      Op = "read key" // the request parameters a key was registered with, then whether the archive holds its job
	OpInsert       Op = "insert"

	// The attempts log (fencedwrite.Annotation.Attempts), where the table
	// keeps one: a claim's or takeover's rows, one INSERT … SELECT for all
	// the jobs of the transaction (the attempt read back from each job
	// under the claim's row lock), and an operator resolution's row.
	OpRecordClaims     Op = "record claims"
	OpRecordResolution Op = "record resolution"

	OpClaimSend        Op = "claim"           // ready → running, attempt+1, will send
	OpClaimReconcile   Op = "claim reconcile" // ready → running, attempt+1, will reconcile
	OpTakeover         Op = "takeover"        // running → running, attempt+1, reconcile
	OpComplete         Op = "complete"
	OpReschedule       Op = "reschedule"
	OpManualReview     Op = "manual review"
	OpFail             Op = "fail"
	OpWakeUp           Op = "wake-up"
	OpResolveSucceeded Op = "resolve succeeded"
	OpResolveReconcile Op = "resolve reconcile"
	OpResolveRefund    Op = "resolve refund"

	// The many-row UPDATEs: the move of OpClaimSend, OpClaimReconcile,
	// OpTakeover or OpComplete for several jobs in one statement, fenced on
	// `id IN (…) AND state = … AND attempt = ?`. One statement moves jobs
	// held or read at the same attempt; a row moves only when it is still in
	// that state at that attempt, and the trigger checks every row on its
	// own. A value that differs from job to job (a completion's provider
	// refund id) is picked per row: `ELT(FIELD(id, …ids), …values)`.
	OpClaimSendMany      Op = "claim many"
	OpClaimReconcileMany Op = "claim reconcile many"
	OpTakeoverMany       Op = "takeover many"
	OpCompleteMany       Op = "complete many"
)

// Many maps a transition to the statement that makes the same move for
// several jobs at once, where there is one.
var Many = map[Op]Op{
	OpClaimSend:      OpClaimSendMany,
	OpClaimReconcile: OpClaimReconcileMany,
	OpTakeover:       OpTakeoverMany,
	OpComplete:       OpCompleteMany,
}

// single returns the transition whose move the many-row statement op makes.
func single(op Op) (Op, bool) {
	for one, many := range Many {
		if many == op {
			return one, true
		}
	}
	return "", false
}

// Transition is the move of the state machine that an UPDATE makes: from
// one state to another, at the same attempt or at attempt+1.
type Transition struct {
	From, To string
	Bump     bool // attempt+1
}

// Transitions are DESIGN.md's state machine, one entry per fenced UPDATE.
// The generator renders each statement from it, MustTable checks each
// statement against it, and the database trigger allows exactly these moves.
var Transitions = map[Op]Transition{
	OpClaimSend:        {fencedwrite.StateReady, fencedwrite.StateRunning, true},
	OpClaimReconcile:   {fencedwrite.StateReady, fencedwrite.StateRunning, true},
	OpTakeover:         {fencedwrite.StateRunning, fencedwrite.StateRunning, true},
	OpComplete:         {fencedwrite.StateRunning, fencedwrite.StateSucceeded, false},
	OpReschedule:       {fencedwrite.StateRunning, fencedwrite.StateReady, false},
	OpManualReview:     {fencedwrite.StateRunning, fencedwrite.StateManualReview, false},
	OpFail:             {fencedwrite.StateRunning, fencedwrite.StateFailed, false},
	OpWakeUp:           {fencedwrite.StateReady, fencedwrite.StateReady, false},
	OpResolveSucceeded: {fencedwrite.StateManualReview, fencedwrite.StateSucceeded, true},
	OpResolveReconcile: {fencedwrite.StateManualReview, fencedwrite.StateReady, true},
	OpResolveRefund:    {fencedwrite.StateManualReview, fencedwrite.StateReady, true},
}

// Param names one argument of a statement. Statements bind their
// arguments by name: the generator records, for each placeholder, the
// name of the value it takes, and Bind looks the values up by that name.
type Param string

// The arguments of fenced statements. ParamID, ParamAttempt, ParamWriter and
// ParamNewAttempt come from the Write itself; the others are the values of
// the transition.
const (
	ParamID          Param = "id"
	ParamIDs         Param = "ids"         // a list of ids: its one placeholder becomes one per id
	ParamAttempt     Param = "attempt"     // the attempt the fence requires: held (lease) or seen (read)
	ParamWriter      Param = "writer"      // the attempt the write declares: the same as ParamAttempt
	ParamNewAttempt  Param = "new attempt" // attempt+1
	ParamLeaseUntil  Param = "lease until" // UTC, as text
	ParamNow         Param = "now"         // UTC, as text: the claim's reading of the database clock
	ParamKeyWindow   Param = "key window"  // microseconds
	ParamProviderRef Param = fencedwrite.ValueProviderRefundID
	ParamNextAction  Param = "next action"
	ParamDelay       Param = "delay" // microseconds
	ParamLastError   Param = "last error"
	ParamReason      Param = "reason"
	ParamEvidence    Param = "evidence"
	ParamKey         Param = "key"        // the operation key
	ParamLimit       Param = "limit"      // how many rows a batch locks at most
	ParamAttemptOp   Param = "attempt op" // fencedwrite.AttemptClaim or AttemptTakeover
	ParamHolder      Param = "holder"     // the process (or operator) that took the attempt
)

// RequestParam names the request parameter stored in column col (Enqueue).
func RequestParam(col string) Param { return Param("request " + col) }

// Each names the list of p's values, one per id of ParamIDs and in the
// same order, in a many-row statement.
func Each(p Param) Param { return Param("each " + p) }

// eachOf returns the parameter whose values the list p holds.
func eachOf(p Param) (Param, bool) {
	one, ok := strings.CutPrefix(string(p), "each ")
	return Param(one), ok
}
