package stripe

import (
	"context"

	stripego "github.com/stripe/stripe-go/v84"

	"github.com/fencekit/fencekit/provider"
)

// CreateForTest sends req's refund without reading its payment first:
// stripe-mock's fixtures capture nothing, so the payment check would refuse
// every request before the shape of the refund's creation is checked.
func (c *Client) CreateForTest(ctx context.Context, req provider.RefundRequest) (provider.Refund, error) {
	kind, err := check(req)
	if err != nil {
		return provider.Refund{}, err
	}
	return c.create(ctx, req, kind)
}

// StripeForTest is the stripe-go client underneath, configured as c's.
func (c *Client) StripeForTest() *stripego.Client { return c.sc }
