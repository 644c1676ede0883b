package console

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/fencekit/fencekit/fencedwrite"
	"github.com/fencekit/fencekit/operator"
)

// resolution reads a resolution form.
func resolution(r *http.Request, id int64, v viewer) (operator.Resolution, error) {
	seen, err := strconv.ParseInt(r.PostFormValue("seen_attempt"), 10, 64)
	if err != nil || seen < 0 {
		return operator.Resolution{}, &fencedwrite.FieldError{Field: "seen_attempt", Problem: fmt.Sprintf("%q is not an attempt: reload the job", r.PostFormValue("seen_attempt"))}
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
	c.act(rw, r, "resolve", func(res operator.Resolution) (string, error) {
		switch as := r.PostFormValue("as"); as {
		case "succeeded", "reconcile":
			res.As = operator.Action(as)
		default:
			return "", &fencedwrite.FieldError{Field: "as", Problem: fmt.Sprintf("%q: resolve as succeeded or reconcile (a resend needs a second operator)", as)}
		}
		if res.As != operator.AsSucceeded {
			res.RefundID = ""
		}
		_, err := c.cfg.Operator.Resolve(r.Context(), res)
		return "resolved", err
	})
}

func (c *Console) request(rw http.ResponseWriter, r *http.Request) {
	c.act(rw, r, "request approval", func(res operator.Resolution) (string, error) {
		switch as := r.PostFormValue("as"); as {
		case "override":
			res.As, res.Override = operator.AsSucceeded, true
		case "refund":
			res.As, res.RefundID = operator.AsRefund, ""
		default:
			return "", &fencedwrite.FieldError{Field: "as", Problem: fmt.Sprintf("%q: request an override or a resend (refund)", as)}
		}
		_, err := c.cfg.Operator.RequestApproval(r.Context(), res)
		return "requested", err
	})
}

// act runs one action on the job of the path, then shows the job: after
// success through a redirect (so a reload does not post again), to the
// next free job in the queue when the form asked for it; after a refusal
// with the operator API's sentence and status, and the form as typed.
func (c *Console) act(rw http.ResponseWriter, r *http.Request, what string, do func(operator.Resolution) (string, error)) {
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
		status, sentence := c.explain(r, what, err)
		if status == http.StatusNotFound {
			c.refuse(rw, r, status, sentence)
			return
		}
		c.showJob(rw, r, id, status, "", sentence)
		return
	}
	c.log.Info("console: action", "operator", v.Name, "job", id, "path", r.URL.Path, "done", done)
	if done == "resolved" && r.PostFormValue("next") != "" {
		next, ok, err := c.cfg.Operator.NextInQueue(r.Context(), v.Name, id)
		switch {
		case err != nil:
			c.log.Error("console: find the next job", "err", err)
		case ok:
			http.Redirect(rw, r, fmt.Sprintf("/jobs/%d?done=next", next), http.StatusSeeOther)
			return
		default:
			done = "last"
		}
	}
	http.Redirect(rw, r, fmt.Sprintf("/jobs/%d?done=%s", id, done), http.StatusSeeOther)
}

// onIt marks the operator as on the job ("I'm on it").
func (c *Console) onIt(rw http.ResponseWriter, r *http.Request) {
	c.act(rw, r, "mark on it", func(res operator.Resolution) (string, error) {
		_, err := c.cfg.Operator.OnIt(r.Context(), res.JobID, res.Operator, res.SeenAttempt)
		return "onit", err
	})
}

// letGo removes the operator's mark from the job.
func (c *Console) letGo(rw http.ResponseWriter, r *http.Request) {
	id, err := jobID(r)
	if err != nil {
		c.refuse(rw, r, http.StatusNotFound, err.Error())
		return
	}
	if err := c.cfg.Operator.LetGo(r.Context(), id, operatorOf(r).Name); err != nil {
		status, sentence := c.explain(r, "let go", err)
		c.showJob(rw, r, id, status, "", sentence)
		return
	}
	http.Redirect(rw, r, fmt.Sprintf("/jobs/%d?done=letgo", id), http.StatusSeeOther)
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
	res, err := c.cfg.Operator.Approve(r.Context(), id, v.Name, r.PostFormValue("confirm"))
	if err != nil {
		c.approvalRefused(rw, r, id, "approve", err)
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
		c.approvalRefused(rw, r, id, "decline", err)
		return
	}
	c.log.Info("console: declined", "operator", v.Name, "request", id, "job", a.JobID)
	http.Redirect(rw, r, fmt.Sprintf("/jobs/%d?done=declined", a.JobID), http.StatusSeeOther)
}

// approvalRefused shows the approvals again with the sentence of a refusal
// and its status (the one table of refusals: an audited refusal is never
// an internal error).
func (c *Console) approvalRefused(rw http.ResponseWriter, r *http.Request, id int64, what string, err error) {
	status, sentence := c.explain(r, what+" request "+strconv.FormatInt(id, 10), err)
	a, aerr := c.cfg.Operator.Approvals(r.Context(), true, operator.Page{Limit: c.cfg.PageSize})
	if aerr != nil {
		c.failed(rw, r, "the approval requests", aerr)
		return
	}
	c.render(rw, r, status, "approvals", page{Title: "Approvals", Tab: "approvals", Error: fmt.Sprintf("Request %d: %s", id, sentence), Data: approvalsData{Approvals: a}})
}
