package operator

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"time"

	"github.com/fencekit/fencekit/ent"
	"github.com/fencekit/fencekit/ent/consolesession"
	"github.com/fencekit/fencekit/ent/predicate"
)

// Sessions of the console, kept in the database (console_sessions): a
// restart or a second console process keeps operators signed in. The
// browser holds a random token; the table holds only its SHA-256, so
// whoever reads the table cannot sign in. Times are the caller's clock
// (the console's), given to each call.

// SessionTouch is how stale a session's last use may be: a session is
// marked used at most once per SessionTouch, so it may end up to that much
// before its idle time.
const SessionTouch = time.Minute

// Session is a live console session.
type Session struct {
	ID        int64
	Operator  string
	Roles     string // as the users file gave them at sign-in
	CreatedAt time.Time
	SeenAt    time.Time
	ExpiresAt time.Time
}

// tokenHash is the stored form of a session token.
func tokenHash(token string) string {
	h := sha256.Sum256([]byte(token))
	return hex.EncodeToString(h[:])
}

// NewToken returns a fresh random token: 32 bytes from crypto/rand,
// base64url.
func NewToken() string {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic("operator: crypto/rand failed: " + err.Error()) // never returns an error on Linux
	}
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// StartSession records a new session of operator, with roles, started at
// now and ending at now+maxAge at the latest, and returns its token (only
// its hash is stored).
func (s *Service) StartSession(ctx context.Context, operator, roles string, now time.Time, maxAge time.Duration) (string, error) {
	if err := CheckOperator("operator", operator); err != nil {
		return "", fmt.Errorf("start session: %w", err)
	}
	if maxAge <= 0 {
		return "", fmt.Errorf("start session: %w", inputErr("maxAge", "must be positive, got %v", maxAge))
	}
	token := NewToken()
	now = now.UTC()
	err := s.c.ConsoleSession.Create().SetTokenHash(tokenHash(token)).SetOperator(operator).SetRoles(roles).
		SetCreatedAt(now).SetSeenAt(now).SetExpiresAt(now.Add(maxAge)).Exec(ctx)
	if err != nil {
		return "", fmt.Errorf("start session of %s: %w", operator, err)
	}
	return token, nil
}

// Session returns token's live session at now, marking it used: or
// ErrSessionEnded when no session has the token, it ended, it was unused
// for idle, or it passed its maximum age (then it is ended here).
func (s *Service) Session(ctx context.Context, token string, now time.Time, idle time.Duration) (Session, error) {
	if token == "" {
		return Session{}, fmt.Errorf("read session: %w", ErrSessionEnded)
	}
	hash := tokenHash(token)
	r, err := s.c.ConsoleSession.Query().Where(consolesession.TokenHash(hash)).Only(ctx)
	if ent.IsNotFound(err) {
		return Session{}, fmt.Errorf("read session: %w", ErrSessionEnded)
	}
	if err != nil {
		return Session{}, fmt.Errorf("read session: %w", err)
	}
	now = now.UTC()
	switch {
	case r.EndedAt != nil:
		return Session{}, fmt.Errorf("read session: %s: %w", deref(r.EndReason), ErrSessionEnded)
	case !now.Before(r.ExpiresAt):
		_ = s.endWhere(ctx, "expired", now, consolesession.ID(r.ID))
		return Session{}, fmt.Errorf("read session: expired: %w", ErrSessionEnded)
	case now.Sub(r.SeenAt) > idle:
		_ = s.endWhere(ctx, "idle", now, consolesession.ID(r.ID))
		return Session{}, fmt.Errorf("read session: unused for %v: %w", idle, ErrSessionEnded)
	}
	if now.Sub(r.SeenAt) >= SessionTouch {
		if err := s.c.ConsoleSession.Update().Where(consolesession.ID(r.ID), consolesession.EndedAtIsNil()).SetSeenAt(now).Exec(ctx); err != nil {
			return Session{}, fmt.Errorf("mark session used: %w", err)
		}
		r.SeenAt = now
	}
	return Session{ID: r.ID, Operator: r.Operator, Roles: r.Roles, CreatedAt: r.CreatedAt.UTC(), SeenAt: r.SeenAt.UTC(), ExpiresAt: r.ExpiresAt.UTC()}, nil
}

// EndSession ends token's session at now, for why ("signed out", "roles
// changed"). Ending a session that has ended already is not an error.
func (s *Service) EndSession(ctx context.Context, token, why string, now time.Time) error {
	if err := s.endWhere(ctx, why, now, consolesession.TokenHash(tokenHash(token))); err != nil {
		return fmt.Errorf("end session: %w", err)
	}
	return nil
}

// EndSessionsOf ends every live session of operator at now, for why (their
// roles changed, they left the users file), and returns how many it ended.
func (s *Service) EndSessionsOf(ctx context.Context, operator, why string, now time.Time) (int, error) {
	n, err := s.c.ConsoleSession.Update().Where(consolesession.Operator(operator), consolesession.EndedAtIsNil()).
		SetEndedAt(now.UTC()).SetEndReason(why).Save(ctx)
	if err != nil {
		return 0, fmt.Errorf("end sessions of %s: %w", operator, err)
	}
	return n, nil
}

// endWhere ends the live sessions p selects, at now, for why.
func (s *Service) endWhere(ctx context.Context, why string, now time.Time, p predicate.ConsoleSession) error {
	return s.c.ConsoleSession.Update().Where(p, consolesession.EndedAtIsNil()).SetEndedAt(now.UTC()).SetEndReason(why).Exec(ctx)
}
