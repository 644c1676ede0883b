package console

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/fencekit/fencekit/operator"
)

// Sessions live in the database (package operator, console_sessions): a
// restart or a second console process keeps every operator signed in. The
// session cookie holds a random token; the table holds only its SHA-256.
// The session's CSRF token is derived from the session token (a hash of
// it under another label), so it is never stored and two processes agree
// on it. A session ends after SessionIdle unused, SessionMaxAge after
// sign-in, on sign-out, and when the users file gives its operator other
// roles (or drops the operator).
//
// Before sign-in there is no session: the sign-in form carries a token
// that must equal the one in a short-lived cookie of its own (a double-
// submit token: another site can neither read nor set the Strict,
// HttpOnly cookie), stamped with its time so that a form left open past
// SessionIdle is refused.

// session is the request's live session: its token (from the cookie) and
// what the database holds.
type session struct {
	token string
	operator.Session
}

// csrf is the session's CSRF token.
func (s session) csrf() string { return csrfOf(s.token) }

func csrfOf(token string) string {
	h := sha256.Sum256([]byte("fencekit console csrf\x00" + token))
	return base64.RawURLEncoding.EncodeToString(h[:])
}

// validCSRF compares a form's token with want in constant time.
func validCSRF(want, token string) bool {
	return token != "" && want != "" && subtle.ConstantTimeCompare([]byte(want), []byte(token)) == 1
}

// rolesOf is the canonical text of an operator's roles, as sessions keep
// it.
func rolesOf(u User) string {
	rs := make([]string, len(u.Roles))
	for i, r := range u.Roles {
		rs[i] = string(r)
	}
	slices.Sort(rs)
	return strings.Join(rs, ",")
}

// cookieName is the session cookie's name: with the __Host- prefix when the
// cookie is Secure, so that the browser refuses it from a sub-domain or a
// plain-HTTP page.
func (c *Console) cookieName(r *http.Request) string {
	if c.secure(r) {
		return "__Host-fencekit_console"
	}
	return "fencekit_console"
}

// signInCookie is the name of the sign-in form's double-submit cookie.
func (c *Console) signInCookie(r *http.Request) string {
	if c.secure(r) {
		return "__Host-fencekit_signin"
	}
	return "fencekit_signin"
}

func (c *Console) secure(r *http.Request) bool {
	return c.cfg.SecureCookies || r.TLS != nil
}

func (c *Console) setCookie(rw http.ResponseWriter, r *http.Request, name, value string, maxAge time.Duration) {
	http.SetCookie(rw, &http.Cookie{
		Name:     name,
		Value:    value,
		Path:     "/",
		HttpOnly: true,
		Secure:   c.secure(r),
		SameSite: http.SameSiteStrictMode,
		MaxAge:   int(maxAge / time.Second),
	})
}

func (c *Console) clearCookie(rw http.ResponseWriter, r *http.Request, name string) {
	http.SetCookie(rw, &http.Cookie{
		Name: name, Value: "", Path: "/", HttpOnly: true, Secure: c.secure(r),
		SameSite: http.SameSiteStrictMode, MaxAge: -1,
	})
}

// startSession signs operator u in: a new session in the database, its
// token in the cookie.
func (c *Console) startSession(ctx context.Context, rw http.ResponseWriter, r *http.Request, u User) (session, error) {
	token, err := c.cfg.Operator.StartSession(ctx, u.Name, rolesOf(u), c.cfg.Now(), c.cfg.SessionMaxAge)
	if err != nil {
		return session{}, err
	}
	c.setCookie(rw, r, c.cookieName(r), token, c.cfg.SessionMaxAge)
	return session{token: token, Session: operator.Session{Operator: u.Name, Roles: rolesOf(u)}}, nil
}

// session returns the request's live session, if any. A database failure
// is an error, not a signed-out operator.
func (c *Console) session(r *http.Request) (session, bool, error) {
	ck, err := r.Cookie(c.cookieName(r))
	if err != nil || ck.Value == "" {
		return session{}, false, nil
	}
	s, err := c.cfg.Operator.Session(r.Context(), ck.Value, c.cfg.Now(), c.cfg.SessionIdle)
	switch {
	case errors.Is(err, operator.ErrSessionEnded):
		return session{}, false, nil
	case err != nil:
		return session{}, false, err
	}
	return session{token: ck.Value, Session: s}, true, nil
}

// endSession ends the request's session, if any, for why.
func (c *Console) endSession(r *http.Request, s session, why string) {
	if err := c.cfg.Operator.EndSession(r.Context(), s.token, why, c.cfg.Now()); err != nil {
		c.log.Error("console: end session", "operator", s.Operator, "err", err)
	}
}

// signInToken returns the sign-in form's token, setting its cookie: a
// random value and the time it was made.
func (c *Console) signInToken(rw http.ResponseWriter, r *http.Request) string {
	token := operator.NewToken() + "." + strconv.FormatInt(c.cfg.Now().Unix(), 10)
	c.setCookie(rw, r, c.signInCookie(r), token, c.cfg.SessionIdle)
	return token
}

// validSignIn checks a sign-in form's token against its cookie, and its
// age against SessionIdle.
func (c *Console) validSignIn(r *http.Request, token string) bool {
	ck, err := r.Cookie(c.signInCookie(r))
	if err != nil || !validCSRF(ck.Value, token) {
		return false
	}
	_, at, ok := strings.Cut(token, ".")
	unix, err := strconv.ParseInt(at, 10, 64)
	if !ok || err != nil {
		return false
	}
	age := c.cfg.Now().Sub(time.Unix(unix, 0))
	return age >= -time.Minute && age <= c.cfg.SessionIdle
}
