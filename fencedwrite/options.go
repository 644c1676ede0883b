package fencedwrite

import (
	"errors"
	"time"
)

// Defaults for ClaimOptions. They are the demo's numbers from DESIGN.md, not
// production advice: tune Lease from the provider's P99 latency, the deploy
// hand-over time and the refund SLO.
const (
	DefaultLease           = 30 * time.Second
	DefaultKeyRetention    = 24 * time.Hour // Stripe keeps idempotency keys for 24 h
	DefaultProviderTimeout = 3 * time.Second
	DefaultSkewMargin      = 5 * time.Minute
)

// ClaimOptions configures Claim and Takeover. A zero field takes its default.
type ClaimOptions struct {
	// Lease is how long the claim keeps others from taking over. Expiry only
	// opens the race: write rights end when another takeover commits.
	Lease time.Duration
	// KeyRetention is how long the provider honours an idempotency key.
	KeyRetention time.Duration
	// ProviderTimeout bounds one provider call.
	ProviderTimeout time.Duration
	// SkewMargin covers clock differences between us and the provider.
	SkewMargin time.Duration
}

// WithDefaults returns o with every zero field set to its default.
func (o ClaimOptions) WithDefaults() ClaimOptions {
	if o.Lease == 0 {
		o.Lease = DefaultLease
	}
	if o.KeyRetention == 0 {
		o.KeyRetention = DefaultKeyRetention
	}
	if o.ProviderTimeout == 0 {
		o.ProviderTimeout = DefaultProviderTimeout
	}
	if o.SkewMargin == 0 {
		o.SkewMargin = DefaultSkewMargin
	}
	return o
}

// Validate checks o after defaults are applied and names the bad field.
func (o ClaimOptions) Validate() error {
	o = o.WithDefaults()
	var errs []error
	if o.Lease < time.Microsecond {
		errs = append(errs, fieldErr("ClaimOptions.Lease", "must be at least 1µs (the resolution of the lease column), got %v", o.Lease))
	}
	if o.ProviderTimeout < 0 {
		errs = append(errs, fieldErr("ClaimOptions.ProviderTimeout", "must not be negative, got %v", o.ProviderTimeout))
	}
	if o.SkewMargin < 0 {
		errs = append(errs, fieldErr("ClaimOptions.SkewMargin", "must not be negative, got %v", o.SkewMargin))
	}
	if o.KeyWindow() <= 0 {
		errs = append(errs, fieldErr("ClaimOptions.KeyRetention",
			"must exceed ProviderTimeout + SkewMargin (%v), got %v", o.ProviderTimeout+o.SkewMargin, o.KeyRetention))
	}
	return errors.Join(errs...)
}

// KeyWindow is how long after its first use the idempotency key may still be
// sent: retention minus the provider timeout minus the skew margin. A claim
// whose key is older than this reconciles instead of sending.
func (o ClaimOptions) KeyWindow() time.Duration {
	return o.KeyRetention - o.ProviderTimeout - o.SkewMargin
}
