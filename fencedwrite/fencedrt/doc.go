// Package fencedrt is the runtime of the code that fencedwrite/entext
// generates: the table of fenced statements, the transaction runner, claims,
// enqueue and the backstop on Ent's generic builders.
//
// Services do not call it: they use the generated client (for refund_jobs,
// github.com/fencekit/fencekit/ent) and switch on the outcomes declared in
// package fencedwrite. Like ent's sqlgraph, its API follows the generator and
// may change in any release. It cannot be used to run arbitrary SQL: a Table
// is built only from statements that carry the fence (MustTable checks each
// one), and a Write names one of its table's statements, never a query.
package fencedrt
