package money

import (
	"errors"
	"math"
	"strings"
	"testing"
)

func TestFormatUsesTheCurrencyExponent(t *testing.T) {
	for _, c := range []struct {
		minor    int64
		currency string
		want     string
	}{
		{1250, "EUR", "12.50"},
		{1001, "EUR", "10.01"},
		{5, "USD", "0.05"},
		{0, "EUR", "0.00"},
		{1250, "JPY", "1250"},
		{1250, "KWD", "1.250"},
		{7, "BHD", "0.007"},
		{12345, "CLF", "1.2345"}, // ISO 4217 funds codes with exponent 4 and 0
		{12345, "UYW", "1.2345"},
		{12345, "UYI", "12345"},
		{-1250, "EUR", "-12.50"},
		{math.MinInt64, "EUR", "-92233720368547758.08"},
		{math.MaxInt64, "EUR", "92233720368547758.07"},
	} {
		if got := Format(c.minor, c.currency); got != c.want {
			t.Errorf("Format(%d, %s) = %q, want %q", c.minor, c.currency, got, c.want)
		}
	}
}

func TestParseIsExactAndRefusesTooManyDecimals(t *testing.T) {
	for _, c := range []struct {
		in       string
		currency string
		want     int64
	}{
		{"12.50", "EUR", 1250},
		{"12.5", "EUR", 1250},
		{"12", "EUR", 1200},
		{"0.01", "EUR", 1},
		{"1250", "JPY", 1250},
		{"1.250", "KWD", 1250},
		{"1.2345", "CLF", 12345},
		{"12345", "UYI", 12345},
		{"0.29", "EUR", 29}, // float64(0.29)*100 is 28.999999999999996
		{"92233720368547758.07", "EUR", math.MaxInt64},
	} {
		got, err := Parse(c.in, c.currency)
		if err != nil || got != c.want {
			t.Errorf("Parse(%q, %s) = %d, %v; want %d", c.in, c.currency, got, err, c.want)
		}
		if back := Format(got, c.currency); err == nil && strings.TrimRight(back, "0") != strings.TrimRight(c.in, "0") && !strings.HasPrefix(back, c.in) {
			t.Errorf("Format(Parse(%q)) = %q", c.in, back)
		}
	}
	for _, c := range []struct{ in, currency, says string }{
		{"12.505", "EUR", "has 3 decimals, EUR has 2"},
		{"12.5", "JPY", "has decimals, JPY has none"},
		{"1.2345", "KWD", "has 4 decimals, KWD has 3"},
		{"-1", "EUR", "not a decimal number"},
		{"1e3", "EUR", "not a decimal number"},
		{"1,50", "EUR", "not a decimal number"},
		{".5", "EUR", "not a decimal number"},
		{"5.", "EUR", "not a decimal number"},
		{"", "EUR", "not a decimal number"},
		{"0.00", "EUR", "more than zero"},
		{"92233720368547758.08", "EUR", "too large"},
	} {
		_, err := Parse(c.in, c.currency)
		if !errors.Is(err, ErrAmount) || !strings.Contains(err.Error(), c.says) {
			t.Errorf("Parse(%q, %s) = %v, want ErrAmount saying %q", c.in, c.currency, err, c.says)
		}
	}
}
