// Package history records what the processes of a chaos run did to refund
// jobs, and checks it against the job state machine.
//
// Each worker process appends its operations to its own JSONL file through a
// Recorder: one line when an operation is called, one when it returns. Load
// reads a run's files back, and Check decides whether, job by job, some order
// of the recorded operations (respecting real time: an operation that
// returned before another was called comes first) explains every answer the
// workers got and the row the database holds at the end.
//
// The model follows etcd's robustness tests: when a worker cannot know
// whether its COMMIT landed (a lost reply, a cut connection, a killed
// process), the model forks. Its state is the set of rows, (state, attempt)
// pairs, the job could be at; an operation with an unknown outcome adds the
// row it would have made and keeps the ones it might not have touched, and it
// may take effect at any time after its call, even after its return. A job
// starts as {ready@0}. The moves, for an operation of attempt a:
//
//	claim     ready@a-1         → running@a
//	takeover  running@a-1       → running@a
//	resolve   manual_review@a-1 → ready@a (new evidence sends the job back to reconcile)
//	write     running@a         → To@a (ready, succeeded, failed or manual_review)
//
// An acknowledged operation needs its source row among the possible ones and
// leaves only its target; a write answered already_settled needs running@a or
// To@a and leaves To@a; a write answered superseded or refused needs some row
// other than running@a (the fence did not match) and drops running@a; a
// rolled-back operation changes nothing. The final row must be one of the
// rows left at the end. Provider calls are not part of the model: they only
// appear in explanations.
//
// The search for an order is github.com/anishathalye/porcupine's, run on each
// job on its own, so the check grows linearly with the number of jobs.
//
// Zombies measures, from the same events, whether a run exercised what the
// fence exists for: write-backs sent after another worker's takeover
// committed and refused as superseded, by kind of write-back, alone in their
// transaction and in batches (Event.Batch).
package history
