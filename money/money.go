// Package money converts refund amounts between minor units (what the
// database and the provider hold: 1250) and major units (what people read
// and type: "12.50"), exactly, with each currency's ISO 4217 exponent. No
// floating point is involved anywhere.
package money

import (
	"errors"
	"fmt"
	"math"
	"strings"
)

// ErrAmount means a major amount could not be read: not a plain decimal
// number, more decimals than the currency has, zero or negative, or too
// large. The error says which.
var ErrAmount = errors.New("invalid amount")

// zero, three and four list the codes of ISO 4217 whose minor unit
// exponent is 0, 3 or 4: the circulating currencies and the funds codes
// (UYI, CLF, UYW), which a refund can be in too; every other code has 2.
var (
	zero  = " BIF CLP DJF GNF ISK JPY KMF KRW PYG RWF UGX UYI VND VUV XAF XOF XPF "
	three = " BHD IQD JOD KWD LYD OMR TND "
	four  = " CLF UYW "
)

// Exponent returns the number of decimals of currency's minor unit: 0 for
// JPY, 3 for KWD and BHD, 4 for CLF, 2 by default (also for unknown codes).
func Exponent(currency string) int {
	c := " " + strings.ToUpper(currency) + " "
	switch {
	case len(currency) != 3:
	case strings.Contains(zero, c):
		return 0
	case strings.Contains(three, c):
		return 3
	case strings.Contains(four, c):
		return 4
	}
	return 2
}

// Format returns minor in major units of currency, with exactly the
// currency's number of decimals: Format(1250, "EUR") is "12.50",
// Format(1250, "JPY") "1250", Format(1250, "KWD") "1.250". A negative
// amount keeps its sign.
func Format(minor int64, currency string) string {
	exp := Exponent(currency)
	sign := ""
	u := uint64(minor)
	if minor < 0 {
		sign, u = "-", uint64(-(minor+1))+1 // math.MinInt64 too
	}
	digits := fmt.Sprintf("%0*d", exp+1, u)
	if exp == 0 {
		return sign + digits
	}
	return sign + digits[:len(digits)-exp] + "." + digits[len(digits)-exp:]
}

// Parse reads a positive major amount of currency ("12.50", "12.5", "12")
// into minor units (1250). It refuses signs, exponents, separators other
// than one '.', more decimals than the currency has ("12.505" EUR), zero,
// and amounts beyond int64; each error wraps ErrAmount and says why.
func Parse(s, currency string) (int64, error) {
	exp := Exponent(currency)
	whole, frac, dot := strings.Cut(s, ".")
	if whole == "" || (dot && frac == "") || !digitsOnly(whole) || !digitsOnly(frac) {
		return 0, fmt.Errorf("%w: %q is not a decimal number like 12.50", ErrAmount, s)
	}
	if len(frac) > exp {
		if exp == 0 {
			return 0, fmt.Errorf("%w: %q has decimals, %s has none", ErrAmount, s, currency)
		}
		return 0, fmt.Errorf("%w: %q has %d decimals, %s has %d", ErrAmount, s, len(frac), currency, exp)
	}
	var v uint64
	for _, c := range whole + frac + strings.Repeat("0", exp-len(frac)) {
		d := uint64(c - '0')
		if v > (math.MaxInt64-d)/10 {
			return 0, fmt.Errorf("%w: %q is too large", ErrAmount, s)
		}
		v = v*10 + d
	}
	if v == 0 {
		return 0, fmt.Errorf("%w: %q must be more than zero", ErrAmount, s)
	}
	return int64(v), nil
}

func digitsOnly(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}
