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
//     concatenations, fmt.Sprintf with constant format and arguments or
//     integer verbs), and each embedded file (//go:embed), that parses as SQL
//     (TiDB's MySQL grammar, with ?, :name, $1 and @name as bound values) and
//     writes existing rows of a fenced table without the fence: UPDATE
//     (single or multi-table), INSERT … ON DUPLICATE KEY UPDATE, REPLACE and
//     LOAD DATA … REPLACE (which cannot be fenced), and DELETE with -delete. Reads and plain
//     INSERTs are never reported. A constant used only as the head of a
//     longer string is judged in the longer string.
//   - Text the parser does not read but shaped like a write of a fenced
//     table (PostgreSQL's RETURNING, ::, …): unprovable, the message
//     naming the construct and its offset; an upsert or REPLACE it does not
//     read (MySQL 8.0.19's row alias) is reported as unfenceable. Log and
//     error text is not SQL.
//   - The lease regression: a write whose WHERE clause also requires the
//     lease to be still valid (lease_until > NOW() in any spelling). Lease
//     expiry opens the race; only a committed takeover revokes write rights.
//   - A writer declaration taken from the row (SET writer_attempt = attempt,
//     in any spelling): it passes the database's check whatever the writer
//     holds.
//   - Queries built at run time (concatenation, fmt.Sprintf with variable
//     arguments, locals, package variables, builders, helpers) that reach a
//     SQL sink (a method named Exec…, Query…, Prepare…, NamedExec… taking the
//     query string first or after a context.Context: database/sql, Ent's raw
//     ExecContext/QueryContext, dialect.Driver, sqlx, goqu, gorm's Exec and
//     Raw, sqlx's package functions, bun's NewRaw, xorm's Exec/Query…/SQL,
//     dbr's …BySql, names given with -sinks) when a
//     constant fragment of them writes a fenced table, and run-time edits of
//     a fenced query (strings.Replace, slicing): they cannot be proven
//     fenced (sqlc's expansion of sqlc.slice, a list of placeholders, keeps
//     the query). A strings.Builder whose writes are constants is judged for
//     each content it may hold.
//   - Wrappers and helpers, across packages through analysis facts: a
//     function that passes a string parameter to a sink is a sink, judged
//     at each call with the query it would send; a function that returns a
//     query carries it to its callers.
//   - Query builders of a fenced table: squirrel, goqu, gorm (and its Save,
//     which falls back to an upsert), Ent's dialect/sql, dbr's Update, bun's
//     NewUpdate and xorm's Update chain, rendered to the
//     SQL they send and judged like it.
//   - Ent's generic update builders (Update, UpdateOne, UpdateOneID, and
//     Modify on them) and upsert builders (Create().OnConflict…) of an
//     entity whose table is fenced, outside the generated package; Delete
//     builders with -delete. Queries never.
//
// A justified exception is written //fencelint:allow <reason> on the
// reported line or the line above. A directive without a reason does not
// suppress and is reported; so is a directive that suppresses nothing.
//
// Flags:
//
//	-tables  comma-separated table[:state[:token[:lease[:writer]]]] (default refund_jobs:state:attempt:lease_until:writer_attempt)
//	-delete  also judge DELETE statements and delete builders
//	-sinks   extra SQL sinks: Name, path/to/pkg.Func or path/to/pkg.Type.Method
//	-runtime import path of the fenced layer's runtime (empty: no check)
//	-baseline baseline file of accepted findings (default $FENCELINT_BASELINE, which go vet needs)
//
// # Baseline and fixes
//
// A baseline (package baseline; written by fencelint -write-baseline)
// accepts today's findings, keyed by package, module-relative file,
// enclosing function and message with a count: they are not reported,
// new ones are, and so is an entry that no longer matches, so that the
// file only shrinks. An unfenced UPDATE written as a literal in a sink call
// whose job value (v.ID among the arguments, v with State and Attempt
// fields, only read in the function) is at hand carries a suggested fix
// appending AND state = ? AND attempt = ? and v.State, v.Attempt.
package analyzer
