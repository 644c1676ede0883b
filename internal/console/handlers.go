package console

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/fencekit/fencekit/internal/term"
)

type ctxKey struct{}

// viewer is the signed-in operator of a request.
type viewer struct {
	User
	csrf    string
	proxied bool // signed in by the proxy: signing out is the proxy's
}

func operatorOf(r *http.Request) viewer {
	v, _ := r.Context().Value(ctxKey{}).(viewer)
	return v
}

// identify returns the request's operator, with the session's CSRF token,
// or the status to refuse it with. With an AuthHeader, the proxy's header
// names the operator, believed only on a connection from a trusted proxy;
// the session then only carries the CSRF token and follows the header's
// name. A session whose operator's roles changed in the users file, or who
// left it, ends.
func (c *Console) identify(rw http.ResponseWriter, r *http.Request) (viewer, int, error) {
	if c.cfg.AuthHeader != "" {
		if !trusted(c.cfg.TrustedProxies, r) {
			c.log.Warn("console: request not from a trusted proxy refused", "remote", r.RemoteAddr, "header", c.cfg.AuthHeader, "claimed", r.Header.Get(c.cfg.AuthHeader))
			return viewer{}, http.StatusForbidden, nil
		}
		// Exactly one value: a proxy that appends its header to the
		// client's (rather than replacing it) forwards the client's first,
		// and neither can then be believed.
		values := r.Header.Values(c.cfg.AuthHeader)
		if len(values) != 1 {
			c.log.Warn("console: the proxy's identity header does not hold exactly one value: configure the proxy to replace it", "header", c.cfg.AuthHeader, "values", values)
			return viewer{}, http.StatusForbidden, nil
		}
		name := values[0]
		u, ok := c.cfg.Users[name]
		if !ok {
			c.log.Warn("console: the proxy names an operator the users file does not list", "name", name)
			return viewer{}, http.StatusForbidden, nil
		}
		ss, ok, err := c.session(r)
		if err != nil {
			return viewer{}, 0, err
		}
		if !ok || ss.Operator != u.Name || ss.Roles != rolesOf(u) {
			if ok {
				c.endSession(r, ss, "the proxy names another operator, or the roles changed")
			}
			if ss, err = c.startSession(r.Context(), rw, r, u); err != nil {
				return viewer{}, 0, err
			}
		}
		return viewer{User: u, csrf: ss.csrf(), proxied: true}, 0, nil
	}
	ss, ok, err := c.session(r)
	if err != nil {
		return viewer{}, 0, err
	}
	if !ok {
		return viewer{}, http.StatusUnauthorized, nil
	}
	u, ok := c.cfg.Users[ss.Operator]
	switch {
	case !ok:
		c.endSession(r, ss, "removed from the users file")
		return viewer{}, http.StatusUnauthorized, nil
	case rolesOf(u) != ss.Roles:
		c.log.Info("console: session ended: the operator's roles changed", "operator", u.Name, "was", ss.Roles, "now", rolesOf(u))
		c.endSession(r, ss, "roles changed")
		return viewer{}, http.StatusUnauthorized, nil
	}
	return viewer{User: u, csrf: ss.csrf()}, 0, nil
}

// signedIn serves h to an operator who holds role (every operator may
// read). Every POST, whoever signed the operator in (the form or the
// proxy), must carry the session's CSRF token; a refused POST writes
// nothing.
func (c *Console) signedIn(role Role, h func(http.ResponseWriter, *http.Request)) http.Handler {
	return http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet && r.Header.Get("Sec-Fetch-Site") == "cross-site" {
			if _, err := r.Cookie(c.cookieName(r)); err != nil {
				// A link from another site (a chat, a ticket): the browser
				// holds the SameSite=Strict cookie back. Reload from here,
				// where it sends it, rather than sign the operator out by
				// starting a new session.
				c.render(rw, r, http.StatusOK, "reload", page{Title: "Opening the console"})
				return
			}
		}
		v, status, err := c.identify(rw, r)
		switch {
		case err != nil:
			c.log.Error("console: read the session", "err", err)
			c.refuse(rw, r, http.StatusServiceUnavailable, "The console could not read your session from the database. Try again.")
			return
		case status == 0:
		case status == http.StatusUnauthorized && r.Method == http.MethodGet:
			http.Redirect(rw, r, "/login", http.StatusSeeOther)
			return
		case status == http.StatusUnauthorized:
			c.refuse(rw, r, status, "Sign in first: your session has ended.")
			return
		default:
			c.refuse(rw, r, status, "Forbidden.")
			return
		}
		if r.Method == http.MethodPost {
			if !c.parseForm(rw, r) {
				return
			}
			if !validCSRF(v.csrf, r.PostFormValue("csrf")) {
				c.log.Warn("console: POST without the session's CSRF token refused", "operator", v.Name, "proxied", v.proxied, "path", r.URL.Path, "remote", r.RemoteAddr)
				c.refuse(rw, r, http.StatusForbidden, "This form has expired or did not come from the console. Reload the page and try again.")
				return
			}
		}
		if role != Viewer && !v.Has(role) {
			c.log.Warn("console: action refused for the operator's roles", "operator", v.Name, "needs", role, "path", r.URL.Path)
			c.refuse(rw, r, http.StatusForbidden, "Your roles do not allow this: it needs the "+string(role)+" role.")
			return
		}
		h(rw, r.WithContext(context.WithValue(r.Context(), ctxKey{}, v)))
	})
}

// parseForm reads a POST's form, refusing a body over MaxBody (413) or one
// that is not a form (400).
func (c *Console) parseForm(rw http.ResponseWriter, r *http.Request) bool {
	err := r.ParseForm()
	if err == nil {
		return true
	}
	var tooBig *http.MaxBytesError
	if errors.As(err, &tooBig) {
		c.refuse(rw, r, http.StatusRequestEntityTooLarge, fmt.Sprintf("The form is larger than the console accepts (%d bytes).", MaxBody))
		return false
	}
	c.refuse(rw, r, http.StatusBadRequest, "The request is not a form.")
	return false
}

type loginData struct {
	CSRF, Name, Error string
}

func (c *Console) loginPage(rw http.ResponseWriter, r *http.Request) {
	if c.cfg.AuthHeader != "" {
		http.Redirect(rw, r, "/", http.StatusSeeOther)
		return
	}
	if _, ok, _ := c.session(r); ok {
		http.Redirect(rw, r, "/", http.StatusSeeOther)
		return
	}
	c.render(rw, r, http.StatusOK, "login", page{Title: "Sign in", Data: loginData{CSRF: c.signInToken(rw, r)}})
}

func (c *Console) login(rw http.ResponseWriter, r *http.Request) {
	if c.cfg.AuthHeader != "" {
		c.refuse(rw, r, http.StatusNotFound, "Operators sign in through the proxy.")
		return
	}
	if !c.parseForm(rw, r) {
		return
	}
	if !c.validSignIn(r, r.PostFormValue("csrf")) {
		// An expired sign-in page, or a forged one: a fresh form, nothing else.
		c.render(rw, r, http.StatusForbidden, "login", page{Title: "Sign in", Data: loginData{CSRF: c.signInToken(rw, r),
			Error: "This sign-in form has expired or did not come from the console. Try again."}})
		return
	}
	name, password := strings.TrimSpace(r.PostFormValue("name")), r.PostFormValue("password")
	key := c.limit.key(name, r)
	if until, blocked := c.limit.blocked(key); blocked {
		c.log.Warn("console: sign-in refused, too many failures", "name", name, "remote", r.RemoteAddr)
		// Retry-After counts whole seconds (RFC 9110), rounded up.
		rw.Header().Set("Retry-After", strconv.FormatInt(int64((until.Sub(c.cfg.Now())+time.Second-1)/time.Second), 10))
		c.render(rw, r, http.StatusTooManyRequests, "login", page{Title: "Sign in", Data: loginData{CSRF: r.PostFormValue("csrf"), Name: name,
			Error: "Too many failed sign-ins for this name from your address. Try again later."}})
		return
	}
	u, ok := c.cfg.Users.authenticate(name, password)
	if !ok {
		c.limit.fail(key)
		c.log.Warn("console: sign-in failed", "name", name, "remote", r.RemoteAddr)
		c.render(rw, r, http.StatusUnauthorized, "login", page{Title: "Sign in", Data: loginData{CSRF: r.PostFormValue("csrf"), Name: name,
			Error: "Wrong name or password."}})
		return
	}
	c.limit.succeed(key)
	// A new session at sign-in: whatever the browser held before is
	// worth nothing.
	if old, ok, _ := c.session(r); ok {
		c.endSession(r, old, "signed in again")
	}
	if _, err := c.startSession(r.Context(), rw, r, u); err != nil {
		c.log.Error("console: start session", "operator", u.Name, "err", err)
		c.refuse(rw, r, http.StatusServiceUnavailable, "The console could not record your session in the database. Try again.")
		return
	}
	c.clearCookie(rw, r, c.signInCookie(r))
	c.log.Info("console: signed in", "operator", u.Name, "remote", r.RemoteAddr)
	http.Redirect(rw, r, "/", http.StatusSeeOther)
}

func (c *Console) logout(rw http.ResponseWriter, r *http.Request) {
	if !c.parseForm(rw, r) {
		return
	}
	ss, ok, err := c.session(r)
	if err != nil || !ok || !validCSRF(ss.csrf(), r.PostFormValue("csrf")) {
		c.refuse(rw, r, http.StatusForbidden, "This form has expired or did not come from the console.")
		return
	}
	c.endSession(r, ss, "signed out")
	c.clearCookie(rw, r, c.cookieName(r))
	http.Redirect(rw, r, "/login", http.StatusSeeOther)
}

// page is what every template receives.
type page struct {
	Title    string
	Operator viewer
	Flash    string
	Error    string
	// Tab is the navigation entry the page belongs to.
	Tab  string
	Data any
}

// CanResolve and friends tell templates which forms to show; the handlers
// check again.
func (p page) CanResolve() bool { return p.Operator.Has(Resolver) }
func (p page) CanApprove() bool { return p.Operator.Has(Approver) }
func (p page) CSRF() string     { return p.Operator.csrf }
func (p page) Proxied() bool    { return p.Operator.proxied }

// render executes the page into a buffer before anything is written, so a
// template error is a clean 500, never half a page; then it makes every
// invisible or reordering character visible (visible) and writes.
func (c *Console) render(rw http.ResponseWriter, r *http.Request, status int, name string, p page) {
	if p.Operator.Name == "" {
		p.Operator = operatorOf(r)
	}
	t, ok := c.pages[name]
	if !ok {
		c.log.Error("console: no such template", "name", name)
		http.Error(rw, "internal error", http.StatusInternalServerError)
		return
	}
	var buf bytes.Buffer
	if err := t.ExecuteTemplate(&buf, "layout", p); err != nil {
		c.log.Error("console: render page", "page", name, "err", err)
		http.Error(rw, "internal error", http.StatusInternalServerError)
		return
	}
	rw.Header().Set("Content-Type", "text/html; charset=utf-8")
	rw.Header().Set("Cache-Control", "no-store")
	rw.WriteHeader(status)
	_, _ = rw.Write(visible(buf.Bytes()))
}

// visible returns a rendered page with every character that would hide or
// reorder text written out as Go quotes it ("\u202e"): control characters
// but tab and line breaks, Unicode format characters (bidirectional
// controls U+202A to U+202E and U+2066 to U+2069, zero-width characters),
// line and paragraph separators, and invalid UTF-8. The console's own
// templates hold none, so whatever it finds came from someone else (a
// provider's answer, a webhook, a reason, a name typed in a form), on
// every page, in text and attributes alike, whatever the template forgot.
func visible(page []byte) []byte {
	if utf8.Valid(page) && !bytes.ContainsFunc(page, hides) {
		return page
	}
	out := make([]byte, 0, len(page)+64)
	for i := 0; i < len(page); {
		r, size := utf8.DecodeRune(page[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			out = fmt.Appendf(out, `\x%02x`, page[i])
		case hides(r):
			out = append(out, term.Escape(r)...)
		default:
			out = append(out, page[i:i+size]...)
		}
		i += size
	}
	return out
}

// hides reports whether r can hide or reorder text on a page.
func hides(r rune) bool {
	if r == '\n' || r == '\r' || r == '\t' {
		return false
	}
	return term.Hides(r)
}

// refuse answers with an error page and status.
func (c *Console) refuse(rw http.ResponseWriter, r *http.Request, status int, msg string) {
	c.render(rw, r, status, "error", page{Title: http.StatusText(status), Error: msg})
}
