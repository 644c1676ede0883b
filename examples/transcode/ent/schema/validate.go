package schema

import (
	"fmt"

	"entgo.io/ent/dialect"
)

// datetime6 stores a UTC time with microseconds; Ent's default on MySQL is a
// whole-second timestamp.
var datetime6 = map[string]string{dialect.MySQL: "datetime(6)"}

// maxKeyLen bounds a job key and a preset: the encoder takes the key as its
// idempotency key.
const maxKeyLen = 128

// keyType stores identifiers; the identifier validator enforces the length
// with a clearer message than Ent's MaxLen.
var keyType = map[string]string{dialect.MySQL: fmt.Sprintf("varchar(%d)", maxKeyLen)}

// identifier checks a job key or a preset: 1 to maxKeyLen printable ASCII
// characters without spaces.
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
