package console

import (
	"fmt"
	"html/template"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/fencekit/fencekit/operator"
)

var pageNames = []string{"login", "error", "reload", "dashboard", "queue", "search", "job", "approvals", "engineering"}

var funcs = template.FuncMap{
	// stamp is operator.Stamp: the one time format of both front ends.
	"stamp": func(v any) string {
		switch t := v.(type) {
		case time.Time:
			return operator.Stamp(t)
		case *time.Time:
			if t == nil {
				return ""
			}
			return operator.Stamp(*t)
		}
		return fmt.Sprint(v)
	},
	"age":   age,
	"count": func(s stateCount) string { return s.String() },
	"money": moneyList,
}

// moneyList prints amounts per currency: "11.50 EUR, 3000 JPY".
func moneyList(as []operator.Amount) string {
	if len(as) == 0 {
		return "nothing"
	}
	parts := make([]string, len(as))
	for i, a := range as {
		parts[i] = a.String()
	}
	return strings.Join(parts, ", ")
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

// failed answers a read that failed: a refusal of the operator API with its
// status and sentence (a bad cursor, an unknown job), anything else with
// 500 and a log line.
func (c *Console) failed(rw http.ResponseWriter, r *http.Request, what string, err error) {
	status, sentence := operator.Explain(err)
	if status == http.StatusInternalServerError {
		c.log.Error("console: "+what, "err", err)
		sentence = "The console could not read " + what + ". Try again; the log has the details."
	}
	c.refuse(rw, r, status, sentence)
}

type queueData struct {
	Summary operator.QueueSummary
	Reason  string
	Kind    *operator.ReasonKind
	Queue   operator.QueuePage
	Left    []operator.Departure
	Me      string
}

func (c *Console) queue(rw http.ResponseWriter, r *http.Request) {
	reason := r.URL.Query().Get("reason")
	d := queueData{Reason: reason, Me: operatorOf(r).Name}
	var err error
	if d.Queue, err = c.cfg.Operator.Queue(r.Context(), reason, c.page(r)); err != nil {
		c.failed(rw, r, "the manual-review queue", err)
		return
	}
	for _, k := range operator.ReasonKinds() {
		if k.Key == reason {
			d.Kind = &k
		}
	}
	if d.Summary, err = c.cfg.Operator.QueueSummary(r.Context()); err != nil {
		c.failed(rw, r, "the queue's summary", err)
		return
	}
	if r.URL.Query().Get("after") == "" && reason == "" {
		left, err := c.cfg.Operator.Departures(r.Context(), operator.Page{Limit: 10})
		if err != nil {
			c.failed(rw, r, "the departures from the queue", err)
			return
		}
		d.Left = left.Departures
	}
	c.render(rw, r, http.StatusOK, "queue", page{Title: "Manual review", Tab: "queue", Data: d})
}

type option struct {
	Value, Label string
	Selected     bool
}

type searchData struct {
	Q, By, State string
	Fields       []option
	States       []option
	Jobs         []operator.JobSummary
	Next         string
	NextURL      string
}

var searchStates = []option{{"", "any state", false}, {"manual_review", "in manual review", false}, {"ready", "waiting (ready)", false},
	{"running", "running", false}, {"failed", "failed (not refunded)", false}, {"succeeded", "succeeded (refunded)", false}}

// search lists jobs: by state (the dashboard's counts link here), and by
// a prefix of the operation key, the payment reference or the provider
// refund id, each on its index. "any" looks the prefix up in the three and
// shows the union (one page of each). One match of a search opens the job.
func (c *Console) search(rw http.ResponseWriter, r *http.Request) {
	q, by, state := strings.TrimSpace(r.URL.Query().Get("q")), r.URL.Query().Get("by"), r.URL.Query().Get("state")
	d := searchData{Q: q, By: by, State: state}
	for _, f := range []option{{"any", "key, payment or refund id", false}, {"key", "operation key", false}, {"payment", "payment reference", false}, {"refund", "provider refund id", false}} {
		f.Selected = f.Value == by || (by == "" && f.Value == "any")
		d.Fields = append(d.Fields, f)
	}
	for _, s := range searchStates {
		s.Selected = s.Value == state
		d.States = append(d.States, s)
	}
	if q == "" && state == "" {
		c.render(rw, r, http.StatusOK, "search", page{Title: "Jobs", Tab: "search", Data: d})
		return
	}
	queries := map[string]operator.Query{"key": {OperationKey: q}, "payment": {PaymentRef: q}, "refund": {ProviderRefundID: q}}
	var order []string
	switch {
	case q == "":
		order = []string{"state"}
		queries["state"] = operator.Query{}
	case by == "" || by == "any":
		d.By, order = "any", []string{"key", "payment", "refund"}
	case by == "key" || by == "payment" || by == "refund":
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
		query := queries[k]
		query.State, query.Prefix = state, true
		res, err := c.cfg.Operator.Search(r.Context(), query, p)
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
		if len(order) == 1 && res.Next != "" {
			d.NextURL = "/search?" + url.Values{"q": {q}, "by": {d.By}, "state": {state}, "after": {res.Next}}.Encode()
		}
	}
	if len(d.Jobs) == 1 && q != "" && r.URL.Query().Get("after") == "" {
		http.Redirect(rw, r, "/jobs/"+strconv.FormatInt(d.Jobs[0].ID, 10), http.StatusSeeOther)
		return
	}
	c.render(rw, r, http.StatusOK, "search", page{Title: "Jobs", Tab: "search", Data: d})
}

type jobData struct {
	Job *operator.JobView
	// Form is what the operator typed into a refused form, shown again.
	Form struct{ As, RefundID, Reason string }
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
	"next":      "Resolved. The audit records it. This is the next job in the queue.",
	"last":      "Resolved. The audit records it. No other job in the queue is free.",
	"requested": "Approval requested: a second operator must approve it on the Approvals page.",
	"approved":  "Approved and carried out. The audit records both operators.",
	"declined":  "Request declined: nothing was done to the job. The audit records it.",
	"onit":      "You are on it: the other operators see your name on this job until it leaves the queue.",
	"letgo":     "You let go of this job.",
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
	d := jobData{Job: j}
	if problem != "" && r.Method == http.MethodPost {
		d.Form.As, d.Form.RefundID, d.Form.Reason = r.PostFormValue("as"), r.PostFormValue("refund_id"), r.PostFormValue("reason")
	}
	c.render(rw, r, status, "job", page{Title: fmt.Sprintf("Job %d", id), Tab: "queue", Flash: flash, Error: problem, Data: d})
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
	c.render(rw, r, http.StatusOK, "approvals", page{Title: "Approvals", Tab: "approvals", Data: approvalsData{Approvals: a}})
}

// explain is the operator API's sentence for a refusal, logged.
func (c *Console) explain(r *http.Request, what string, err error) (int, string) {
	status, sentence := operator.Explain(err)
	if status == http.StatusInternalServerError {
		c.log.Error("console: "+what+" failed", "operator", operatorOf(r).Name, "path", r.URL.Path, "err", err)
	} else {
		c.log.Warn("console: "+what+" refused", "operator", operatorOf(r).Name, "path", r.URL.Path, "err", err)
	}
	return status, sentence
}
