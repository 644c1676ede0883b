package console

import (
	"errors"
	"fmt"
	"html/template"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/fencekit/fencekit/operator"
)

var pageNames = []string{"login", "error", "reload", "dashboard", "queue", "search", "job", "approvals"}

// stampFormat is how the pages print a time: UTC, milliseconds.
const stampFormat = "2006-01-02 15:04:05.000 UTC"

var funcs = template.FuncMap{
	"stamp": func(v any) string {
		switch t := v.(type) {
		case time.Time:
			return t.UTC().Format(stampFormat)
		case *time.Time:
			if t == nil {
				return ""
			}
			return t.UTC().Format(stampFormat)
		}
		return fmt.Sprint(v)
	},
	"age": age,
	"num": func(f float64) string { return strconv.FormatFloat(f, 'f', -1, 64) },
	"pct": func(f float64) string { return strconv.FormatFloat(100*f, 'f', 1, 64) + "%" },
	"count": func(s stateCount) string {
		if s.More {
			return strconv.Itoa(s.N) + "+"
		}
		return strconv.Itoa(s.N)
	},
}

// age prints a duration for people: "3d 4h", "2h 5m", "42s".
func age(d time.Duration) string {
	if d < 0 {
		d = 0
	}
	switch {
	case d >= 24*time.Hour:
		return fmt.Sprintf("%dd %dh", d/(24*time.Hour), d%(24*time.Hour)/time.Hour)
	case d >= time.Hour:
		return fmt.Sprintf("%dh %dm", d/time.Hour, d%time.Hour/time.Minute)
	case d >= time.Minute:
		return fmt.Sprintf("%dm %ds", d/time.Minute, d%time.Minute/time.Second)
	default:
		return fmt.Sprintf("%ds", d/time.Second)
	}
}

func parsePages() (map[string]*template.Template, error) {
	out := map[string]*template.Template{}
	for _, name := range pageNames {
		t, err := template.New(name).Funcs(funcs).ParseFS(templateFS, "templates/layout.html", "templates/"+name+".html")
		if err != nil {
			return nil, fmt.Errorf("parse template %s: %w", name, err)
		}
		out[name] = t
	}
	return out, nil
}

func (c *Console) page(r *http.Request) operator.Page {
	return operator.Page{Limit: c.cfg.PageSize, After: r.URL.Query().Get("after")}
}

// failed answers a read that failed: a refused input (a bad cursor, say)
// with 400, anything else with 500 and a log line.
func (c *Console) failed(rw http.ResponseWriter, r *http.Request, what string, err error) {
	var in *operator.InputError
	switch {
	case errors.As(err, &in):
		c.refuse(rw, r, http.StatusBadRequest, in.Error())
	case errors.Is(err, operator.ErrNotFound):
		c.refuse(rw, r, http.StatusNotFound, "Not found.")
	default:
		c.log.Error("console: "+what, "err", err)
		c.refuse(rw, r, http.StatusInternalServerError, "The console could not read "+what+". Try again; the log has the details.")
	}
}

type queueData struct {
	Queue operator.QueuePage
	Left  []operator.Departure
}

func (c *Console) queue(rw http.ResponseWriter, r *http.Request) {
	q, err := c.cfg.Operator.Queue(r.Context(), c.page(r))
	if err != nil {
		c.failed(rw, r, "the manual-review queue", err)
		return
	}
	d := queueData{Queue: q}
	if r.URL.Query().Get("after") == "" {
		left, err := c.cfg.Operator.Departures(r.Context(), operator.Page{Limit: 10})
		if err != nil {
			c.failed(rw, r, "the departures from the queue", err)
			return
		}
		d.Left = left.Departures
	}
	c.render(rw, r, http.StatusOK, "queue", page{Title: "Manual review", Data: d})
}

type searchField struct {
	Value, Label string
	Selected     bool
}

type searchData struct {
	Q, By  string
	Fields []searchField
	Jobs   []operator.JobSummary
	Next   string
}

// search finds jobs by operation key, payment reference or provider refund
// id, each on its index. "any" looks the text up in the three and shows
// the union (one page of each).
func (c *Console) search(rw http.ResponseWriter, r *http.Request) {
	q, by := strings.TrimSpace(r.URL.Query().Get("q")), r.URL.Query().Get("by")
	d := searchData{Q: q, By: by}
	for _, f := range []searchField{{"any", "any of them", false}, {"key", "operation key", false}, {"payment", "payment reference", false}, {"refund", "provider refund id", false}} {
		f.Selected = f.Value == by || (by == "" && f.Value == "any")
		d.Fields = append(d.Fields, f)
	}
	if q == "" {
		c.render(rw, r, http.StatusOK, "search", page{Title: "Search", Data: d})
		return
	}
	queries := map[string]operator.Query{"key": {OperationKey: q}, "payment": {PaymentRef: q}, "refund": {ProviderRefundID: q}}
	var order []string
	switch by {
	case "", "any":
		d.By, order = "any", []string{"key", "payment", "refund"}
	case "key", "payment", "refund":
		order = []string{by}
	default:
		c.refuse(rw, r, http.StatusBadRequest, fmt.Sprintf("by=%q: search by key, payment, refund or any", by))
		return
	}
	seen := map[int64]bool{}
	for _, k := range order {
		p := c.page(r)
		if len(order) > 1 {
			p.After = ""
		}
		res, err := c.cfg.Operator.Search(r.Context(), queries[k], p)
		if err != nil {
			c.failed(rw, r, "the search", err)
			return
		}
		for _, j := range res.Jobs {
			if !seen[j.ID] {
				seen[j.ID] = true
				d.Jobs = append(d.Jobs, j)
			}
		}
		if len(order) == 1 {
			d.Next = res.Next
		}
	}
	if len(d.Jobs) == 1 && r.URL.Query().Get("after") == "" {
		http.Redirect(rw, r, "/jobs/"+strconv.FormatInt(d.Jobs[0].ID, 10), http.StatusSeeOther)
		return
	}
	c.render(rw, r, http.StatusOK, "search", page{Title: "Search", Data: d})
}

type jobData struct {
	Job *operator.JobView
}

func jobID(r *http.Request) (int64, error) {
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil || id <= 0 {
		return 0, fmt.Errorf("%q is not a job id", r.PathValue("id"))
	}
	return id, nil
}

// flashes are the messages a redirect after an action may show: fixed
// texts, so that a link cannot put words in the console's mouth.
var flashes = map[string]string{
	"resolved":  "Resolved. The audit records it.",
	"requested": "Approval requested: a second operator must approve it on the Approvals page.",
	"approved":  "Approved and carried out. The audit records both operators.",
	"declined":  "Request declined: nothing was done to the job. The audit records it.",
}

func (c *Console) job(rw http.ResponseWriter, r *http.Request) {
	id, err := jobID(r)
	if err != nil {
		c.refuse(rw, r, http.StatusNotFound, err.Error())
		return
	}
	c.showJob(rw, r, id, http.StatusOK, flashes[r.URL.Query().Get("done")], "")
}

func (c *Console) showJob(rw http.ResponseWriter, r *http.Request, id int64, status int, flash, problem string) {
	j, err := c.cfg.Operator.Job(r.Context(), id)
	if err != nil {
		c.failed(rw, r, fmt.Sprintf("job %d", id), err)
		return
	}
	c.render(rw, r, status, "job", page{Title: fmt.Sprintf("Job %d", id), Flash: flash, Error: problem, Data: jobData{Job: j}})
}

type approvalsData struct {
	Approvals operator.ApprovalsPage
}

func (c *Console) approvals(rw http.ResponseWriter, r *http.Request) {
	a, err := c.cfg.Operator.Approvals(r.Context(), true, c.page(r))
	if err != nil {
		c.failed(rw, r, "the approval requests", err)
		return
	}
	c.render(rw, r, http.StatusOK, "approvals", page{Title: "Approvals", Data: approvalsData{Approvals: a}})
}

// resolution reads a resolution form.
func resolution(r *http.Request, id int64, v viewer) (operator.Resolution, error) {
	seen, err := strconv.ParseInt(r.PostFormValue("seen_attempt"), 10, 64)
	if err != nil || seen < 0 {
		return operator.Resolution{}, &operator.InputError{Field: "seen_attempt", Problem: fmt.Sprintf("%q is not an attempt: reload the job", r.PostFormValue("seen_attempt"))}
	}
	return operator.Resolution{
		JobID:       id,
		RefundID:    strings.TrimSpace(r.PostFormValue("refund_id")),
		Reason:      strings.TrimSpace(r.PostFormValue("reason")),
		Operator:    v.Name,
		SeenAttempt: seen,
	}, nil
}

func (c *Console) resolve(rw http.ResponseWriter, r *http.Request) {
	c.act(rw, r, func(res operator.Resolution) (string, error) {
		switch as := r.PostFormValue("as"); as {
		case "succeeded", "reconcile":
			res.As = operator.Action(as)
		default:
			return "", &operator.InputError{Field: "as", Problem: fmt.Sprintf("%q: resolve as succeeded or reconcile (a resend needs a second operator)", as)}
		}
		_, err := c.cfg.Operator.Resolve(r.Context(), res)
		return "resolved", err
	})
}

func (c *Console) request(rw http.ResponseWriter, r *http.Request) {
	c.act(rw, r, func(res operator.Resolution) (string, error) {
		switch as := r.PostFormValue("as"); as {
		case "override":
			res.As, res.Override = operator.AsSucceeded, true
		case "refund":
			res.As = operator.AsRefund
		default:
			return "", &operator.InputError{Field: "as", Problem: fmt.Sprintf("%q: request an override or a resend (refund)", as)}
		}
		_, err := c.cfg.Operator.RequestApproval(r.Context(), res)
		return "requested", err
	})
}

// act runs one action on the job of the path, then shows the job: after
// success through a redirect (so a reload does not post again), after a
// refusal with the reason and the status that fits it.
func (c *Console) act(rw http.ResponseWriter, r *http.Request, do func(operator.Resolution) (string, error)) {
	id, err := jobID(r)
	if err != nil {
		c.refuse(rw, r, http.StatusNotFound, err.Error())
		return
	}
	v := operatorOf(r)
	res, err := resolution(r, id, v)
	var done string
	if err == nil {
		done, err = do(res)
	}
	if err != nil {
		status, msg := refusal(err)
		c.log.Warn("console: action refused", "operator", v.Name, "job", id, "path", r.URL.Path, "err", err)
		if status == http.StatusNotFound {
			c.refuse(rw, r, status, msg)
			return
		}
		c.showJob(rw, r, id, status, "", msg)
		return
	}
	c.log.Info("console: action", "operator", v.Name, "job", id, "path", r.URL.Path, "done", done)
	http.Redirect(rw, r, fmt.Sprintf("/jobs/%d?done=%s", id, done), http.StatusSeeOther)
}

func requestID(r *http.Request) (int64, error) {
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil || id <= 0 {
		return 0, fmt.Errorf("%q is not an approval request", r.PathValue("id"))
	}
	return id, nil
}

func (c *Console) approve(rw http.ResponseWriter, r *http.Request) {
	id, err := requestID(r)
	if err != nil {
		c.refuse(rw, r, http.StatusNotFound, err.Error())
		return
	}
	v := operatorOf(r)
	res, err := c.cfg.Operator.Approve(r.Context(), id, v.Name)
	if err != nil {
		c.approvalRefused(rw, r, id, err)
		return
	}
	c.log.Info("console: approved", "operator", v.Name, "request", id, "job", res.JobID)
	http.Redirect(rw, r, fmt.Sprintf("/jobs/%d?done=approved", res.JobID), http.StatusSeeOther)
}

// decline closes a request without acting on it: an approver's refusal, or
// their withdrawal of their own request.
func (c *Console) decline(rw http.ResponseWriter, r *http.Request) {
	id, err := requestID(r)
	if err != nil {
		c.refuse(rw, r, http.StatusNotFound, err.Error())
		return
	}
	v := operatorOf(r)
	a, err := c.cfg.Operator.Decline(r.Context(), id, v.Name, strings.TrimSpace(r.PostFormValue("reason")))
	if err != nil {
		c.approvalRefused(rw, r, id, err)
		return
	}
	c.log.Info("console: declined", "operator", v.Name, "request", id, "job", a.JobID)
	http.Redirect(rw, r, fmt.Sprintf("/jobs/%d?done=declined", a.JobID), http.StatusSeeOther)
}

// approvalRefused shows the approvals again with the reason of a refusal.
func (c *Console) approvalRefused(rw http.ResponseWriter, r *http.Request, id int64, err error) {
	status, msg := refusal(err)
	c.log.Warn("console: approval request action refused", "operator", operatorOf(r).Name, "request", id, "path", r.URL.Path, "err", err)
	a, aerr := c.cfg.Operator.Approvals(r.Context(), true, operator.Page{Limit: c.cfg.PageSize})
	if aerr != nil {
		c.failed(rw, r, "the approval requests", aerr)
		return
	}
	c.render(rw, r, status, "approvals", page{Title: "Approvals", Error: msg, Data: approvalsData{Approvals: a}})
}

// refusal maps an operator error to a status and a message for people.
func refusal(err error) (int, string) {
	var in *operator.InputError
	var mm *operator.MismatchError
	switch {
	case errors.As(err, &in):
		return http.StatusUnprocessableEntity, "Refused: " + in.Error() + "."
	case errors.As(err, &mm):
		return http.StatusConflict, "Refused: the refund does not belong to this operation: " + mm.Error() + ". A second operator may approve an override."
	case errors.Is(err, operator.ErrNotFound):
		return http.StatusNotFound, "Not found."
	case errors.Is(err, operator.ErrSameOperator):
		return http.StatusForbidden, "Refused: you requested this yourself; a second operator must approve it."
	case errors.Is(err, operator.ErrResolvedElsewhere), errors.Is(err, operator.ErrNotInReview):
		return http.StatusConflict, "Refused: the job moved since you saw it. Read it again and decide afresh."
	case errors.Is(err, operator.ErrRequestClosed):
		return http.StatusConflict, "Refused: the request is already closed."
	case errors.Is(err, operator.ErrUnknownRefund):
		return http.StatusConflict, "Refused: the provider does not know this refund id. A second operator may approve an override."
	case errors.Is(err, operator.ErrRefundNotSucceeded):
		return http.StatusConflict, "Refused: the provider does not report this refund as succeeded."
	case errors.Is(err, operator.ErrNeedsApproval):
		return http.StatusConflict, "Refused: this needs a second operator's approval. Use “Ask a second operator”."
	case errors.Is(err, operator.ErrOutsideWindow):
		return http.StatusConflict, "Refused: the key is outside its safe resend window. Reconcile instead."
	case errors.Is(err, operator.ErrRefundExists):
		return http.StatusConflict, "Refused: the provider reports a refund for this operation: the money moved or may still move."
	case errors.Is(err, operator.ErrProviderUnavailable):
		return http.StatusServiceUnavailable, "The provider could not be asked; nothing was written. Try again later."
	case errors.Is(err, operator.ErrCommitUnknown):
		return http.StatusServiceUnavailable, "The database did not confirm the resolution: it may or may not have been recorded. Read the job before acting again."
	default:
		return http.StatusInternalServerError, "The action failed; nothing is known to have been written. The log has the details."
	}
}
