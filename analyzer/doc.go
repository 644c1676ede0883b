// Package analyzer defines fencelint, an analyzer that fails the build on
// any write of a fenced table (by default refund_jobs) that is not fenced by
// the job's state and attempt.
//
// # Analyzer fencelint
//
// fencelint: report writes of fenced tables that lack the state + attempt fence
//
// A job row may only be written by the worker holding the current claim. The
// claim is proven in SQL by the WHERE clause: its AND chain must hold
// state = <value> and attempt = <value> on the fenced table, each compared
// with a placeholder (?, or :name) or a literal, in either operand order.
// Without it, a worker whose lease was taken over (a zombie) overwrites the
// decision of the new holder, and a refund can be paid twice.
//
// The analyzer reports:
//
//   - Raw SQL anywhere: each maximal constant string expression, judged where
//     it is used (literals, named constants from any package, constant
//     concatenations, fmt.Sprintf with constant format and arguments), that
//     parses as SQL (TiDB's MySQL grammar) and writes existing rows of a
//     fenced table without the fence: UPDATE (single or multi-table),
//     INSERT … ON DUPLICATE KEY UPDATE and REPLACE (which cannot be fenced),
//     and DELETE with -delete. Text that does not parse is never reported;
//     neither are reads and plain INSERTs. A constant used only as the head
//     of a longer string is judged in the longer string.
//   - The lease regression: a write whose WHERE clause also requires the
//     lease to be still valid (lease_until > NOW() in any spelling). Lease
//     expiry opens the race; only a committed takeover revokes write rights.
//   - Queries built at run time (concatenation, fmt.Sprintf with variable
//     arguments, locals, package variables, same-package helpers) that reach
//     a SQL sink (a method named Exec…, Query… or Prepare… taking the query
//     string first or after a context.Context: database/sql, Ent's raw
//     ExecContext/QueryContext, dialect.Driver, sqlx, …) when a constant
//     fragment of them writes a fenced table: they cannot be proven fenced.
//   - Ent's generic update builders (Update, UpdateOne, UpdateOneID, and
//     Modify on them) of an entity whose table is fenced, outside the
//     generated package; Delete builders with -delete. Queries never.
//
// A justified exception is written //fencelint:allow <reason> on the
// reported line or the line above. A directive without a reason does not
// suppress and is reported; so is a directive that suppresses nothing.
//
// Flags:
//
//	-tables  comma-separated table[:state[:token[:lease]]] (default refund_jobs:state:attempt:lease_until)
//	-delete  also judge DELETE statements and Ent delete builders
package analyzer
