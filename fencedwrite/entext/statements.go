package entext

import (
	"fmt"
	"strings"

	"entgo.io/ent/entc/gen"

	"github.com/fencekit/fencekit/fencedwrite"
)

// statements builds the constant SQL of one fenced table. Every UPDATE
// carries `WHERE id = ? AND state = ? AND attempt = ?` and sets the writer
// column to the attempt it holds; times come from the database clock.
// The argument order of each statement is fixed here and relied on by
// fencedwrite (claims) and by the template (transitions).
func statements(table, id string, a fencedwrite.Annotation, params []*gen.Field) Statements {
	var (
		t      = quote(table)
		state  = quote(a.State)
		token  = quote(a.Token)
		writer = quote(a.Writer)
		lease  = quote(a.LeaseUntil)
		next   = quote(a.NextRunAt)
		action = quote(a.NextAction)
		ref    = quote(a.ProviderRef)
		lastEr = quote(a.LastError)
		reason = quote(a.ReviewReason)
		evid   = quote(a.ReviewEvidence)
		upd    = quote(a.UpdatedAt)
		pk     = quote(id)
		now    = "UTC_TIMESTAMP(6)"
	)
	fence := func(st string) string {
		return fmt.Sprintf(" WHERE %s = ? AND %s = '%s' AND %s = ?", pk, state, st, token)
	}
	update := func(from string, sets ...string) string {
		return "UPDATE " + t + " SET " + strings.Join(sets, ", ") + fence(from)
	}
	cols := []string{}
	vals := []string{}
	for _, p := range params {
		cols = append(cols, quote(p.StorageKey()))
		vals = append(vals, "?")
	}
	cols = append(cols, state, token, action, next, quote(a.CreatedAt), upd)
	vals = append(vals, "'"+fencedwrite.StateReady+"'", "0", "'"+fencedwrite.ActionRefund+"'", now, now, now)
	return Statements{
		Read:       fmt.Sprintf("SELECT %s, %s FROM %s WHERE %s = ?", state, token, t, pk),
		ReadLocked: fmt.Sprintf("SELECT %s, %s FROM %s WHERE %s = ? FOR UPDATE", state, token, t, pk),
		// Arguments: key window in microseconds, id.
		ClaimLock: fmt.Sprintf("SELECT %s, %s, %s, %s <= %s, %s < %s, %s IS NULL OR %s > %s - INTERVAL ? MICROSECOND, %s FROM %s WHERE %s = ? FOR UPDATE",
			state, token, action, next, now, lease, now, quote(a.KeyFirstUsedAt), quote(a.KeyFirstUsedAt), now, now, t, pk),
		// Arguments: new attempt, lease until, now (first use), now (last send), old attempt (writer), now, id, old attempt.
		ClaimSend: update(fencedwrite.StateReady,
			token+" = ?", state+" = '"+fencedwrite.StateRunning+"'", lease+" = ?", action+" = '"+fencedwrite.ActionRefund+"'",
			fmt.Sprintf("%s = COALESCE(%s, ?)", quote(a.KeyFirstUsedAt), quote(a.KeyFirstUsedAt)), quote(a.LastSendAt)+" = ?",
			writer+" = ?", upd+" = ?"),
		// Arguments: new attempt, lease until, old attempt (writer), now, id, old attempt.
		ClaimReconcile: update(fencedwrite.StateReady,
			token+" = ?", state+" = '"+fencedwrite.StateRunning+"'", lease+" = ?", action+" = '"+fencedwrite.ActionReconcile+"'",
			writer+" = ?", upd+" = ?"),
		// Arguments: new attempt, lease until, old attempt (writer), now, id, old attempt.
		Takeover: update(fencedwrite.StateRunning,
			token+" = ?", lease+" = ?", action+" = '"+fencedwrite.ActionReconcile+"'", writer+" = ?", upd+" = ?"),
		// Arguments: the params, in order.
		Insert: fmt.Sprintf("INSERT INTO %s (%s) VALUES (%s)", t, strings.Join(cols, ", "), strings.Join(vals, ", ")),
		// Arguments: provider ref, attempt (writer), id, attempt.
		Complete: update(fencedwrite.StateRunning,
			state+" = '"+fencedwrite.StateSucceeded+"'", ref+" = ?", lease+" = NULL", lastEr+" = NULL",
			writer+" = ?", upd+" = "+now),
		// Arguments: next action, delay in microseconds, provider ref or nil, last error or nil, attempt (writer), id, attempt.
		Reschedule: update(fencedwrite.StateRunning,
			state+" = '"+fencedwrite.StateReady+"'", action+" = ?", next+" = "+now+" + INTERVAL ? MICROSECOND", lease+" = NULL",
			fmt.Sprintf("%s = COALESCE(?, %s)", ref, ref), lastEr+" = ?", writer+" = ?", upd+" = "+now),
		// Arguments: reason, evidence, provider ref or nil, attempt (writer), id, attempt.
		ManualReview: update(fencedwrite.StateRunning,
			state+" = '"+fencedwrite.StateManualReview+"'", reason+" = ?", evid+" = ?", fmt.Sprintf("%s = COALESCE(?, %s)", ref, ref),
			lease+" = NULL", writer+" = ?", upd+" = "+now),
		// Arguments: reason, provider ref or nil, attempt (writer), id, attempt.
		Fail: update(fencedwrite.StateRunning,
			state+" = '"+fencedwrite.StateFailed+"'", lastEr+" = ?", fmt.Sprintf("%s = COALESCE(?, %s)", ref, ref),
			lease+" = NULL", writer+" = ?", upd+" = "+now),
		// Arguments: seen attempt (writer), id, seen attempt. Leaves updated_at
		// alone, so a wake-up of a job that is already due changes nothing but
		// still matches its row.
		WakeUp: update(fencedwrite.StateReady,
			fmt.Sprintf("%s = LEAST(%s, %s)", next, next, now), writer+" = ?"),
		// Arguments: new attempt, provider ref, evidence, seen attempt (writer), id, seen attempt.
		ResolveSucceeded: update(fencedwrite.StateManualReview,
			token+" = ?", state+" = '"+fencedwrite.StateSucceeded+"'", ref+" = ?", evid+" = ?", writer+" = ?", upd+" = "+now),
		// Arguments: new attempt, evidence, seen attempt (writer), id, seen attempt.
		ResolveReconcile: update(fencedwrite.StateManualReview,
			token+" = ?", state+" = '"+fencedwrite.StateReady+"'", action+" = '"+fencedwrite.ActionReconcile+"'", next+" = "+now,
			evid+" = ?", writer+" = ?", upd+" = "+now),
		// Arguments: new attempt, proof, seen attempt (writer), id, seen attempt.
		ResolveRefund: update(fencedwrite.StateManualReview,
			token+" = ?", state+" = '"+fencedwrite.StateReady+"'", action+" = '"+fencedwrite.ActionRefund+"'", next+" = "+now,
			evid+" = ?", writer+" = ?", upd+" = "+now),
	}
}

func quote(name string) string { return "`" + name + "`" }
