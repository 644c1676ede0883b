package provider

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
)

// maxBody bounds a response body; a longer one reads as truncated.
const maxBody = 1 << 20

// HTTPClient is a Client for a provider with a JSON API:
//
//	POST /v1/refunds                 body {payment, amount, currency, reference}, header Idempotency-Key
//	GET  /v1/refunds?reference=KEY   {"data": [refund...]}
//	GET  /v1/refunds?payment=REF     {"data": [refund...]}
//	GET  /v1/refunds/{id}            refund, or 404 resource_missing
//
// A refund is {id, payment, amount, currency, reference, status, reason}; an
// error is {"error": {code, message}}.
type HTTPClient struct {
	base string
	hc   *http.Client
	caps Capabilities
}

var _ Client = (*HTTPClient)(nil)

// NewHTTPClient returns a client for the provider at baseURL that declares
// caps. A nil hc means http.DefaultClient. Calls are bounded by their
// context's deadline, which should be the provider timeout.
func NewHTTPClient(baseURL string, hc *http.Client, caps Capabilities) *HTTPClient {
	if hc == nil {
		hc = http.DefaultClient
	}
	return &HTTPClient{base: strings.TrimSuffix(baseURL, "/"), hc: hc, caps: caps}
}

// Capabilities returns the capabilities given to NewHTTPClient.
func (c *HTTPClient) Capabilities() Capabilities { return c.caps }

// Refund implements Client. Transport errors, timeouts, resets, truncated
// bodies, 5xx and answers it cannot read wrap ErrOutcomeUnknown; 429 is
// ErrRateLimited; 409 maps to ErrKeyParamsMismatch or ErrKeyInUse; 400 and
// 422 to *RejectedError or ErrAlreadyRefunded; an answer that fails Verify
// wraps ErrMismatch; a verified refund reported reversed wraps
// ErrAlreadyRefunded. It sends the request once: it never resends, and neither
// may net/http.
func (c *HTTPClient) Refund(ctx context.Context, req RefundRequest) (Refund, error) {
	if err := req.validate(); err != nil {
		return Refund{}, fmt.Errorf("send refund: %w", err)
	}
	body, _ := json.Marshal(wireRequest{ // cannot fail: strings and an integer
		Payment:   req.PaymentRef,
		Amount:    req.AmountMinor,
		Currency:  req.Currency,
		Reference: req.OperationKey,
	})
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, c.base+"/v1/refunds", bytes.NewReader(body))
	if err != nil {
		return Refund{}, fmt.Errorf("build request: %w: %w", ErrInvalidRequest, err)
	}
	// net/http replays a request carrying an Idempotency-Key when a reused
	// connection fails, using GetBody. That would be a resend nobody decided
	// on, after an outcome that may be unknown; without GetBody it cannot.
	hreq.GetBody = nil
	hreq.Header.Set("Content-Type", "application/json")
	hreq.Header.Set("Idempotency-Key", req.OperationKey)

	code, raw, err := c.do(hreq)
	if err != nil {
		return Refund{Raw: raw}, fmt.Errorf("send refund: %w", err)
	}
	if code/100 != 2 {
		return Refund{Raw: raw}, fmt.Errorf("send refund: %w", refundError(code, raw))
	}
	r, err := decodeRefund(raw)
	if err != nil {
		return Refund{Raw: raw}, fmt.Errorf("send refund: %w", err)
	}
	if err := Verify(req, r); err != nil {
		return r, fmt.Errorf("send refund: %w", err)
	}
	switch r.Status {
	case StatusRejected:
		return r, fmt.Errorf("send refund: %w", &RejectedError{Code: string(StatusRejected), Reason: r.Reason})
	case StatusReversed:
		// It executed, then came back: not a success to complete on, and not
		// a failure either. Reconciling shows the same refund.
		return r, fmt.Errorf("send refund: refund %s reversed: %w", r.ProviderRefundID, ErrAlreadyRefunded)
	}
	return r, nil
}

// Lookup implements Client. The question is the operation key: it asks by
// reference, then, when that finds nothing, lists the payment's refunds and
// keeps those whose reference is q.OperationKey, then, when that finds
// nothing either, asks by q.ProviderRefundID. Each step runs only when c's
// capabilities declare its lookup and q has its field; the first that finds
// something answers. A refund id therefore never hides a refund the key's
// own lookups show: one the provider does not know is one more "not found".
// Every request that fails fails the Lookup (see Client.Lookup).
func (c *HTTPClient) Lookup(ctx context.Context, q Query) ([]Refund, error) {
	asked := false
	if q.OperationKey != "" && c.caps.LookupByReference {
		asked = true
		found, err := c.list(ctx, url.Values{"reference": {q.OperationKey}}, q.OperationKey)
		if err != nil || len(found) > 0 {
			return found, err
		}
	}
	if q.PaymentRef != "" && c.caps.ListByPayment {
		asked = true
		found, err := c.list(ctx, url.Values{"payment": {q.PaymentRef}}, q.OperationKey)
		if err != nil || len(found) > 0 {
			return found, err
		}
	}
	if q.ProviderRefundID != "" && c.caps.LookupByRefundID {
		return c.byID(ctx, q.ProviderRefundID)
	}
	if !asked {
		return nil, fmt.Errorf("look up refund: %w", ErrNoLookup)
	}
	return []Refund{}, nil
}

// list asks GET /v1/refunds?query and keeps the refunds whose reference is
// key (all of them when key is empty).
func (c *HTTPClient) list(ctx context.Context, query url.Values, key string) ([]Refund, error) {
	code, raw, err := c.get(ctx, "/v1/refunds?"+query.Encode())
	if err != nil {
		return nil, err
	}
	if code == http.StatusNotFound {
		// A list is never missing: a provider that says so is not one
		// this client can read.
		return nil, fmt.Errorf("look up refund: provider answered %d: %w", code, ErrOutcomeUnknown)
	}
	var list struct{ Data []json.RawMessage }
	if err := json.Unmarshal(raw, &list); err != nil {
		return nil, fmt.Errorf("decode refunds: %w: %w", ErrOutcomeUnknown, err)
	}
	refunds := []Refund{}
	for _, item := range list.Data {
		r, err := decodeRefund(item)
		if err != nil {
			return nil, fmt.Errorf("look up refund: %w", err)
		}
		if key == "" || r.Reference == key {
			refunds = append(refunds, r)
		}
	}
	return refunds, nil
}

// byID asks GET /v1/refunds/{id}: the refund as reported, or nothing when
// the provider says it has no such refund.
func (c *HTTPClient) byID(ctx context.Context, id string) ([]Refund, error) {
	code, raw, err := c.get(ctx, "/v1/refunds/"+url.PathEscape(id))
	if err != nil {
		return nil, err
	}
	if code == http.StatusNotFound && isMissing(raw) {
		return []Refund{}, nil
	}
	r, err := decodeRefund(raw)
	if err != nil {
		return nil, fmt.Errorf("look up refund: %w", err)
	}
	return []Refund{r}, nil
}

// get sends one lookup and returns a 2xx answer, or a 404 that says the
// resource is missing; any other answer is an error.
func (c *HTTPClient) get(ctx context.Context, path string) (int, []byte, error) {
	hreq, err := http.NewRequestWithContext(ctx, http.MethodGet, c.base+path, nil)
	if err != nil {
		return 0, nil, fmt.Errorf("build request: %w: %w", ErrInvalidRequest, err)
	}
	code, raw, err := c.do(hreq)
	switch {
	case err != nil:
		return 0, nil, fmt.Errorf("look up refund: %w", err)
	case code == http.StatusNotFound && isMissing(raw):
		return code, raw, nil
	case code == http.StatusTooManyRequests:
		return 0, nil, fmt.Errorf("look up refund: %w", ErrRateLimited)
	case code/100 != 2:
		return 0, nil, fmt.Errorf("look up refund: provider answered %d: %w", code, ErrOutcomeUnknown)
	}
	return code, raw, nil
}

// do sends hreq and reads the whole response. Any failure to get a complete
// response wraps ErrOutcomeUnknown, with whatever body arrived.
func (c *HTTPClient) do(hreq *http.Request) (int, []byte, error) {
	resp, err := c.hc.Do(hreq)
	if err != nil {
		return 0, nil, fmt.Errorf("%w: %w", ErrOutcomeUnknown, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxBody+1))
	if err == nil && len(raw) > maxBody {
		err = io.ErrUnexpectedEOF
	}
	if err != nil {
		return resp.StatusCode, raw, fmt.Errorf("read response: %w: %w", ErrOutcomeUnknown, err)
	}
	return resp.StatusCode, raw, nil
}

// refundError maps a non-2xx answer to a refund request. What it does not
// recognise is an unknown outcome: the safe reading of an answer we cannot
// classify.
func refundError(code int, raw []byte) error {
	ec, msg := decodeError(raw)
	switch {
	case code == http.StatusTooManyRequests:
		return ErrRateLimited
	case code == http.StatusConflict && ec == "idempotency_params_mismatch":
		return ErrKeyParamsMismatch
	case code == http.StatusConflict && ec == "idempotency_key_in_use":
		return ErrKeyInUse
	case (code == http.StatusBadRequest || code == http.StatusUnprocessableEntity) && ec != "":
		if ec == "already_refunded" || ec == "exceeds_refundable_amount" {
			return fmt.Errorf("%s: %w", ec, ErrAlreadyRefunded)
		}
		return &RejectedError{Code: ec, Reason: msg}
	}
	return fmt.Errorf("provider answered %d %q: %w", code, ec, ErrOutcomeUnknown)
}

func isMissing(raw []byte) bool {
	code, _ := decodeError(raw)
	return code == "resource_missing"
}

// decodeError reads an {"error": {code, message}} body; any other body gives
// empty strings.
func decodeError(raw []byte) (code, message string) {
	var e wireError
	_ = json.Unmarshal(raw, &e)
	return e.Error.Code, e.Error.Message
}

func decodeRefund(raw []byte) (Refund, error) {
	var w wireRefund
	if err := json.Unmarshal(raw, &w); err != nil {
		return Refund{}, fmt.Errorf("decode refund: %w: %w", ErrOutcomeUnknown, err)
	}
	r := Refund{
		ProviderRefundID: w.ID,
		Reference:        w.Reference,
		PaymentRef:       w.Payment,
		AmountMinor:      w.Amount,
		Currency:         w.Currency,
		Status:           Status(w.Status),
		Reason:           w.Reason,
		Raw:              raw,
	}
	switch r.Status {
	case StatusSucceeded, StatusPending, StatusRejected, StatusReversed:
		return r, nil
	}
	return Refund{}, fmt.Errorf("decode refund: status %q: %w", w.Status, ErrOutcomeUnknown)
}

type wireRequest struct {
	Payment   string `json:"payment"`
	Amount    int64  `json:"amount"`
	Currency  string `json:"currency"`
	Reference string `json:"reference"`
}

type wireRefund struct {
	ID        string `json:"id"`
	Payment   string `json:"payment"`
	Amount    int64  `json:"amount"`
	Currency  string `json:"currency"`
	Reference string `json:"reference"`
	Status    string `json:"status"`
	Reason    string `json:"reason"`
}

type wireError struct {
	Error struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}
