package fencedwrite

import (
	"errors"
	"fmt"
	"os"
	"sync"
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
	// Holder names the process that takes the attempts, as the attempts
	// log records it (which process held attempt N): printable ASCII, at
	// most MaxHolderLen characters. Empty means DefaultHolder
	// ("hostname/pid").
	Holder string
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
	if o.Holder == "" {
		o.Holder = DefaultHolder()
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
	if err := ValidHolder(o.Holder); err != nil {
		errs = append(errs, fieldErr("ClaimOptions.Holder", "%s", err.Error()))
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

// The operations an attempt is recorded with in the attempts log.
const (
	AttemptClaim      = "claim"
	AttemptTakeover   = "takeover"
	AttemptResolution = "resolution"
)

// MaxHolderLen bounds a holder's length (the attempts log's column).
const MaxHolderLen = 255

// ValidHolder checks a holder: 1 to MaxHolderLen printable ASCII
// characters (spaces allowed, control characters not), so that the
// attempts log and every page that shows it print it as it is.
func ValidHolder(h string) error {
	if h == "" {
		return errors.New("must not be empty")
	}
	if len(h) > MaxHolderLen {
		return fmt.Errorf("must be at most %d characters, got %d", MaxHolderLen, len(h))
	}
	for i := 0; i < len(h); i++ {
		if c := h[i]; c < ' ' || c > '~' {
			return fmt.Errorf("must be printable ASCII without control characters, got %q at byte %d", h[i], i)
		}
	}
	return nil
}

var defaultHolder = sync.OnceValue(func() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "unknown-host"
	}
	h := fmt.Sprintf("%s/%d", host, os.Getpid())
	// A host name is printable ASCII by the DNS's rules, but keep the
	// promise whatever the system says.
	b := []byte(h)
	for i, c := range b {
		if c < ' ' || c > '~' {
			b[i] = '?'
		}
	}
	if len(b) > MaxHolderLen {
		b = b[len(b)-MaxHolderLen:]
	}
	return string(b)
})

// DefaultHolder is the holder a claim records when ClaimOptions.Holder is
// empty: "hostname/pid" of this process, computed once.
func DefaultHolder() string { return defaultHolder() }
