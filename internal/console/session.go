package console

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"net/http"
	"sync"
	"time"
)

// session is one browser's sign-in, kept in this process's memory: a
// restart signs every operator out, and two console processes do not share
// sessions (put one console behind the load balancer, or use sticky
// sessions). A session without a user is a browser on the sign-in page: it
// holds the CSRF token of the sign-in form.
type session struct {
	id      string
	user    string // empty until signed in
	csrf    string
	created time.Time
	seen    time.Time
}

type sessions struct {
	mu   sync.Mutex
	now  func() time.Time
	idle time.Duration // a session unused this long ends
	max  time.Duration // a session ends this long after sign-in, used or not
	byID map[string]*session
}

// maxSessions bounds the memory anonymous visitors can make us use.
const maxSessions = 50_000

func randomToken() string {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic("console: crypto/rand failed: " + err.Error()) // never returns an error on Linux
	}
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// create starts a session for user ("" before sign-in).
func (s *sessions) create(user string) *session {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	if len(s.byID) >= maxSessions {
		s.sweep(now)
	}
	if len(s.byID) >= maxSessions { // still full: drop the anonymous ones
		for id, ss := range s.byID {
			if ss.user == "" {
				delete(s.byID, id)
			}
		}
	}
	ss := &session{id: randomToken(), user: user, csrf: randomToken(), created: now, seen: now}
	s.byID[ss.id] = ss
	return ss
}

// get returns the live session id names, and marks it used.
func (s *sessions) get(id string) (session, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ss, ok := s.byID[id]
	if !ok {
		return session{}, false
	}
	now := s.now()
	if s.expired(ss, now) {
		delete(s.byID, id)
		return session{}, false
	}
	ss.seen = now
	return *ss, true
}

func (s *sessions) expired(ss *session, now time.Time) bool {
	return now.Sub(ss.seen) > s.idle || now.Sub(ss.created) > s.max
}

func (s *sessions) end(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.byID, id)
}

// sweep drops expired sessions. s.mu is held.
func (s *sessions) sweep(now time.Time) {
	for id, ss := range s.byID {
		if s.expired(ss, now) {
			delete(s.byID, id)
		}
	}
}

// validCSRF compares a form's token with the session's in constant time.
func validCSRF(ss session, token string) bool {
	return token != "" && subtle.ConstantTimeCompare([]byte(ss.csrf), []byte(token)) == 1
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

func (c *Console) secure(r *http.Request) bool {
	return c.cfg.SecureCookies || r.TLS != nil
}

func (c *Console) setCookie(rw http.ResponseWriter, r *http.Request, ss *session) {
	http.SetCookie(rw, &http.Cookie{
		Name:     c.cookieName(r),
		Value:    ss.id,
		Path:     "/",
		HttpOnly: true,
		Secure:   c.secure(r),
		SameSite: http.SameSiteStrictMode,
		MaxAge:   int(c.cfg.SessionMaxAge / time.Second),
	})
}

func (c *Console) clearCookie(rw http.ResponseWriter, r *http.Request) {
	http.SetCookie(rw, &http.Cookie{
		Name: c.cookieName(r), Value: "", Path: "/", HttpOnly: true, Secure: c.secure(r),
		SameSite: http.SameSiteStrictMode, MaxAge: -1,
	})
}

// session returns the request's live session, if any.
func (c *Console) session(r *http.Request) (session, bool) {
	ck, err := r.Cookie(c.cookieName(r))
	if err != nil || ck.Value == "" {
		return session{}, false
	}
	return c.sessions.get(ck.Value)
}
