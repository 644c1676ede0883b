package kafka

import "github.com/twmb/franz-go/pkg/kgo"

// A track is one partition during one assignment of it to this consumer:
// the records polled from it whose hints are not judged yet, in the order
// they were polled (offset order). Its commit point moves over the judged
// prefix only: everything before it was judged, the first record it names
// was not.
type track struct {
	topic     string
	partition int32
	owned     bool     // false once revoked or lost: nothing is marked for it again
	pending   []*entry // polled, the oldest first; the first is not judged
}

// An entry is one polled record of a track.
type entry struct {
	t      *track
	offset int64
	epoch  int32
	judged bool
}

// add records a polled record.
func (t *track) add(offset int64, epoch int32) *entry {
	e := &entry{t: t, offset: offset, epoch: epoch}
	t.pending = append(t.pending, e)
	return e
}

// judge marks e judged and returns the track's new commit point, the
// offset after the judged prefix, when the prefix grew.
func (t *track) judge(e *entry) (kgo.EpochOffset, bool) {
	e.judged = true
	var last *entry
	for len(t.pending) > 0 && t.pending[0].judged {
		last = t.pending[0]
		t.pending[0] = nil
		t.pending = t.pending[1:]
	}
	if last == nil {
		return kgo.EpochOffset{}, false
	}
	return kgo.EpochOffset{Epoch: last.epoch, Offset: last.offset + 1}, true
}
