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

// identify returns the request's operator and the session's CSRF token. With
// an AuthHeader, the proxy's header names the operator, believed only on a
// connection from a trusted proxy; the session then only carries the CSRF
// token and follows the header's name.
func (c *Console) identify(rw http.ResponseWriter, r *http.Request) (viewer, int) {
	if c.cfg.AuthHeader != "" {
		if !trusted(c.cfg.TrustedProxies, r) {
			c.log.Warn("console: request not from a trusted proxy refused", "remote", r.RemoteAddr, "header", c.cfg.AuthHeader, "claimed", r.Header.Get(c.cfg.AuthHeader))
			return viewer{}, http.StatusForbidden
		}
		// Exactly one value: a proxy that appends its header to the
		// client's (rather than replacing it) forwards the client's first,
		// and neither can then be believed.
		values := r.Header.Values(c.cfg.AuthHeader)
		if len(values) != 1 {
			c.log.Warn("console: the proxy's identity header does not hold exactly one value: configure the proxy to replace it", "header", c.cfg.AuthHeader, "values", values)
			return viewer{}, http.StatusForbidden
		}
		name := values[0]
		u, ok := c.cfg.Users[name]
		if !ok {
			c.log.Warn("console: the proxy names an operator the users file does not list", "name", name)
			return viewer{}, http.StatusForbidden
		}
		ss, ok := c.session(r)
		if !ok || ss.user != u.Name {
			if ok {
				c.sessions.end(ss.id)
			}
			s := c.sessions.create(u.Name)
			c.setCookie(rw, r, s)
			ss = *s
		}
		return viewer{User: u, csrf: ss.csrf, proxied: true}, 0
	}
	ss, ok := c.session(r)
	if !ok || ss.user == "" {
		return viewer{}, http.StatusUnauthorized
	}
	u, ok := c.cfg.Users[ss.user]
	if !ok { // removed from the file since
		c.sessions.end(ss.id)
		return viewer{}, http.StatusUnauthorized
	}
	return viewer{User: u, csrf: ss.csrf}, 0
}

// signedIn serves h to an operator who holds role (every operator may
// read). A POST must carry the session's CSRF token; a refused POST writes
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
		v, status := c.identify(rw, r)
		switch status {
		case 0:
		case http.StatusUnauthorized:
			if r.Method == http.MethodGet {
				http.Redirect(rw, r, "/login", http.StatusSeeOther)
				return
			}
			c.refuse(rw, r, status, "Sign in first.")
			return
		default:
			c.refuse(rw, r, status, "Forbidden.")
			return
		}
		if r.Method == http.MethodPost {
			if !c.parseForm(rw, r) {
				return
			}
			if !validCSRF(session{csrf: v.csrf}, r.PostFormValue("csrf")) {
				c.log.Warn("console: POST without the session's CSRF token refused", "operator", v.Name, "path", r.URL.Path, "remote", r.RemoteAddr)
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
	if ss, ok := c.session(r); ok && ss.user != "" {
		http.Redirect(rw, r, "/", http.StatusSeeOther)
		return
	}
	ss := c.anonymous(rw, r)
	c.render(rw, r, http.StatusOK, "login", page{Title: "Sign in", Data: loginData{CSRF: ss.csrf}})
}

// anonymous returns the browser's session before sign-in, starting one.
func (c *Console) anonymous(rw http.ResponseWriter, r *http.Request) session {
	if ss, ok := c.session(r); ok {
		return ss
	}
	s := c.sessions.create("")
	c.setCookie(rw, r, s)
	return *s
}

func (c *Console) login(rw http.ResponseWriter, r *http.Request) {
	if c.cfg.AuthHeader != "" {
		c.refuse(rw, r, http.StatusNotFound, "Operators sign in through the proxy.")
		return
	}
	if !c.parseForm(rw, r) {
		return
	}
	ss, ok := c.session(r)
	if !ok || !validCSRF(ss, r.PostFormValue("csrf")) {
		// An expired sign-in page, or a forged one: a fresh form, nothing else.
		fresh := c.anonymous(rw, r)
		c.render(rw, r, http.StatusForbidden, "login", page{Title: "Sign in", Data: loginData{CSRF: fresh.csrf,
			Error: "This sign-in form has expired or did not come from the console. Try again."}})
		return
	}
	name, password := strings.TrimSpace(r.PostFormValue("name")), r.PostFormValue("password")
	key := c.limit.key(name, r)
	if until, blocked := c.limit.blocked(key); blocked {
		c.log.Warn("console: sign-in refused, too many failures", "name", name, "remote", r.RemoteAddr)
		// Retry-After counts whole seconds (RFC 9110), rounded up.
		rw.Header().Set("Retry-After", strconv.FormatInt(int64((until.Sub(c.cfg.Now())+time.Second-1)/time.Second), 10))
		c.render(rw, r, http.StatusTooManyRequests, "login", page{Title: "Sign in", Data: loginData{CSRF: ss.csrf, Name: name,
			Error: "Too many failed sign-ins for this name from your address. Try again later."}})
		return
	}
	u, ok := c.cfg.Users.authenticate(name, password)
	if !ok {
		c.limit.fail(key)
		c.log.Warn("console: sign-in failed", "name", name, "remote", r.RemoteAddr)
		c.render(rw, r, http.StatusUnauthorized, "login", page{Title: "Sign in", Data: loginData{CSRF: ss.csrf, Name: name,
			Error: "Wrong name or password."}})
		return
	}
	c.limit.succeed(key)
	// A new session id at sign-in: an id planted before it is worth nothing.
	c.sessions.end(ss.id)
	c.setCookie(rw, r, c.sessions.create(u.Name))
	c.log.Info("console: signed in", "operator", u.Name, "remote", r.RemoteAddr)
	http.Redirect(rw, r, "/", http.StatusSeeOther)
}

func (c *Console) logout(rw http.ResponseWriter, r *http.Request) {
	ss, ok := c.session(r)
	if !ok || !validCSRF(ss, r.PostFormValue("csrf")) {
		c.refuse(rw, r, http.StatusForbidden, "This form has expired or did not come from the console.")
		return
	}
	c.sessions.end(ss.id)
	c.clearCookie(rw, r)
	http.Redirect(rw, r, "/login", http.StatusSeeOther)
}

// page is what every template receives.
type page struct {
	Title    string
	Operator viewer
	Flash    string
	Error    string
	Data     any
}

// CanResolve and friends tell templates which forms to show; the handlers
// check again.
func (p page) CanResolve() bool { return p.Operator.Has(Resolver) }
func (p page) CanApprove() bool { return p.Operator.Has(Approver) }
func (p page) CSRF() string     { return p.Operator.csrf }
func (p page) Proxied() bool    { return p.Operator.proxied }

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
	_, _ = buf.WriteTo(rw)
}

// refuse answers with an error page and status.
func (c *Console) refuse(rw http.ResponseWriter, r *http.Request, status int, msg string) {
	c.render(rw, r, status, "error", page{Title: http.StatusText(status), Error: msg})
}
