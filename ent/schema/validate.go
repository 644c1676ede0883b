package schema

import (
	"fmt"
	"strings"

	"entgo.io/ent/dialect"
)

// maxKeyLen bounds operation keys and payment references. Providers accept
// idempotency keys of up to 255 characters; 128 leaves room to spare.
const maxKeyLen = 128

// keyType stores identifiers; the identifier validator enforces the length
// with a clearer message than Ent's MaxLen.
var keyType = map[string]string{dialect.MySQL: fmt.Sprintf("varchar(%d)", maxKeyLen)}

// identifier checks an operation key or payment reference: it is sent to the
// provider as is, so it must be 1 to maxKeyLen printable ASCII characters
// without spaces.
func identifier(v string) error {
	if v == "" {
		return fmt.Errorf("must not be empty")
	}
	return printable(v, maxKeyLen)
}

// printable checks that v is at most max printable ASCII characters without
// spaces.
func printable(v string, max int) error {
	if len(v) > max {
		return fmt.Errorf("must be at most %d characters, got %d", max, len(v))
	}
	for i := 0; i < len(v); i++ {
		if c := v[i]; c <= ' ' || c > '~' {
			return fmt.Errorf("must be printable ASCII without spaces, got %q at byte %d", v[i], i)
		}
	}
	return nil
}

// maxAmountMinor bounds an amount in minor units (10^15 cents is ten
// trillion dollars): larger values are a unit mix-up, not a refund.
const maxAmountMinor = 1_000_000_000_000_000

func amountMinor(v int64) error {
	switch {
	case v <= 0:
		return fmt.Errorf("must be a positive number of minor units, got %d", v)
	case v > maxAmountMinor:
		return fmt.Errorf("must be at most %d minor units, got %d", int64(maxAmountMinor), v)
	}
	return nil
}

// currencyCode checks an ISO 4217 alphabetic code of a circulating currency.
func currencyCode(v string) error {
	if len(v) != 3 || strings.ToUpper(v) != v {
		return fmt.Errorf("must be a three-letter upper-case ISO 4217 code, got %q", v)
	}
	if !strings.Contains(iso4217, v) {
		return fmt.Errorf("%q is not an ISO 4217 code of a circulating currency", v)
	}
	return nil
}

// iso4217 lists the circulating currencies of ISO 4217 (funds codes,
// precious metals and testing codes left out), space separated.
const iso4217 = "" +
	"AED AFN ALL AMD ANG AOA ARS AUD AWG AZN BAM BBD BDT BGN BHD BIF BMD BND BOB BRL " +
	"BSD BTN BWP BYN BZD CAD CDF CHF CLP CNY COP CRC CUP CVE CZK DJF DKK DOP DZD EGP " +
	"ERN ETB EUR FJD FKP GBP GEL GHS GIP GMD GNF GTQ GYD HKD HNL HTG HUF IDR ILS INR " +
	"IQD IRR ISK JMD JOD JPY KES KGS KHR KMF KPW KRW KWD KYD KZT LAK LBP LKR LRD LSL " +
	"LYD MAD MDL MGA MKD MMK MNT MOP MRU MUR MVR MWK MXN MYR MZN NAD NGN NIO NOK NPR " +
	"NZD OMR PAB PEN PGK PHP PKR PLN PYG QAR RON RSD RUB RWF SAR SBD SCR SDG SEK SGD " +
	"SHP SLE SOS SRD SSP STN SVC SYP SZL THB TJS TMT TND TOP TRY TTD TWD TZS UAH UGX " +
	"USD UYU UZS VED VES VND VUV WST XAF XCD XCG XOF XPF YER ZAR ZMW ZWG"
