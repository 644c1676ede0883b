package jobid

import (
	"strings"
	"testing"
)

// A body the dispatchers write is read back as the same id; anything else
// is refused, never guessed at.
func TestDecodeReadsWhatEncodeWrites(t *testing.T) {
	for _, id := range []int64{1, 42, 1 << 62} {
		if got, err := Decode(Encode(id)); got != id || err != nil {
			t.Errorf("Decode(Encode(%d)) = %d, %v", id, got, err)
		}
	}
	for _, body := range []string{"", "0", "-7", "12 ", "0x10", "abc", strings.Repeat("9", 30)} {
		if _, err := Decode([]byte(body)); err == nil {
			t.Errorf("Decode(%q) took it for a job id", body)
		}
	}
}
