package adopt

import (
	"fmt"
	"strings"

	"ariga.io/atlas/sql/schema"
)

// A column of the team's that carries one of fencekit's names is adopted
// when fencekit's type keeps every value it can hold, byte for byte or
// instant for instant: a shorter VARCHAR or CHAR, a DATETIME or TIMESTAMP
// without fractions, a smaller integer, an ENUM whose values fit. It is
// widened by the same online copy as the article's columns. A change that
// could lose a value (a longer string, a BIGINT UNSIGNED, a DECIMAL) or
// reinterpret one (a number made text, a DATE made a time) is refused.

// widening says why changing a column from from to to could lose or
// reinterpret a value ("" when it cannot), and, when values change shape
// on the way (fractional seconds, a TIMESTAMP read in UTC), what legacy
// readers see afterwards.
func widening(from, to schema.Type) (why, shape string) {
	switch t := to.(type) {
	case *schema.IntegerType:
		return intWidening(from, t), ""
	case *schema.StringType:
		return stringWidening(from, t), ""
	case *schema.EnumType:
		switch f := from.(type) {
		case *schema.EnumType:
			// The values outside fencekit's are the mapping's to decide
			// (state and next_action); another ENUM keeps its values only
			// when they are all fencekit's.
			return "", ""
		case *schema.StringType:
			if f.T != "varchar" && f.T != "char" {
				return "not a varchar, char or enum", ""
			}
			return "", ""
		}
		return "not a varchar, char or enum", ""
	case *schema.TimeType:
		f, ok := from.(*schema.TimeType)
		if !ok || (f.T != "datetime" && f.T != "timestamp") {
			return "not a datetime or timestamp (a date, a time or a number would be read as another instant)", ""
		}
		if p, q := precision(f), precision(t); p > q {
			return fmt.Sprintf("its fractions of a second (%d digits) would be cut to %d", p, q), ""
		}
		if f.T == "timestamp" && t.T == "datetime" {
			return "", "a timestamp becomes a datetime holding the same instant in UTC: legacy readers whose session time zone is not UTC read it " +
				"shifted by their offset (the server converted timestamps to their zone; a datetime is read as written)"
		}
		if precision(f) < precision(t) {
			return "", fmt.Sprintf("values gain %d fractional digits (12:00:00 reads 12:00:00.000000)", precision(t)-precision(f))
		}
		return "", ""
	}
	return "a different type", ""
}

func precision(t *schema.TimeType) int {
	if t.Precision != nil {
		return *t.Precision
	}
	return 0
}

var intRank = map[string]int{"tinyint": 1, "smallint": 2, "mediumint": 3, "int": 4, "bigint": 5}

func intWidening(from schema.Type, to *schema.IntegerType) string {
	var t string
	var unsigned bool
	switch f := from.(type) {
	case *schema.IntegerType:
		t, unsigned = f.T, f.Unsigned
	case *schema.BoolType:
		t = "tinyint" // tinyint(1)
	default:
		return "not an integer"
	}
	switch {
	case intRank[t] > intRank[to.T]:
		return "its values may not fit"
	case intRank[t] == intRank[to.T] && unsigned && !to.Unsigned:
		return "its values may not fit (unsigned values above the signed top)"
	case !unsigned && to.Unsigned:
		return "negative values would not fit"
	}
	return ""
}

// textBytes is the most bytes a text type holds.
var textBytes = map[string]int64{"tinytext": 255, "text": 65535, "mediumtext": 16777215, "longtext": 4294967295}

func stringWidening(from schema.Type, to *schema.StringType) string {
	// chars is the most characters from holds, bytes the most bytes (in
	// utf8mb4, four a character); fencekit's columns are utf8mb4, which
	// holds every character of every other character set.
	var chars, bytes int64
	switch f := from.(type) {
	case *schema.StringType:
		switch {
		case f.T == "varchar" || f.T == "char":
			chars, bytes = int64(f.Size), 4*int64(f.Size)
		case textBytes[f.T] > 0:
			chars, bytes = textBytes[f.T], textBytes[f.T]
		default:
			return "not a text type"
		}
	case *schema.EnumType:
		for _, v := range f.Values {
			chars = max(chars, int64(len([]rune(v))))
		}
		bytes = 4 * chars
	default:
		return "not a text type (a number or a binary string would be reinterpreted)"
	}
	switch {
	case to.T == "varchar" || to.T == "char":
		if chars > int64(to.Size) {
			return fmt.Sprintf("longer values (up to %d characters) would not fit in %d", chars, to.Size)
		}
	case textBytes[to.T] > 0:
		if bytes > textBytes[to.T] {
			return fmt.Sprintf("longer values (up to %d bytes) would not fit in a %s", bytes, to.T)
		}
	default:
		return "a different type"
	}
	return ""
}

// dropsTrailingSpaces reports whether values moving from from to to lose
// their trailing spaces (a CHAR strips them: 'EUR ' reads 'EUR'): the rows
// that hold one are refused by id.
func dropsTrailingSpaces(from, to schema.Type) bool {
	f, ok := from.(*schema.StringType)
	t, ok2 := to.(*schema.StringType)
	return ok && ok2 && f.T != "char" && t.T == "char"
}

// isTimestamp reports whether c is a TIMESTAMP column (its values are
// instants the server shows in the session's time zone).
func isTimestamp(c *schema.Column) bool {
	t, ok := c.Type.Type.(*schema.TimeType)
	return ok && strings.EqualFold(t.T, "timestamp")
}
