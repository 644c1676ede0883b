// Package jobid is the dispatchers' one form of a job id on the wire: a
// message's body (a RabbitMQ message's, a Kafka record's value) is the
// job's id in decimal and nothing else. It also names ids in errors and
// logs.
package jobid

import (
	"fmt"
	"strconv"
)

// Encode is id as a message's body.
func Encode(id int64) []byte { return strconv.AppendInt(nil, id, 10) }

// Decode is the job id body names. An error means body is not a positive
// decimal integer: not a job id, and not ours to guess at.
func Decode(body []byte) (int64, error) {
	id, err := strconv.ParseInt(string(body), 10, 64)
	if err == nil && id <= 0 {
		err = fmt.Errorf("%d is not a job id (they are positive)", id)
	}
	return id, err
}

// Quote is body quoted for a log, cut after 64 bytes.
func Quote(body []byte) string {
	if len(body) > 64 {
		return strconv.Quote(string(body[:64])) + "…"
	}
	return strconv.Quote(string(body))
}

// List names up to ten ids, and how many more.
func List(ids []int64) string {
	const most = 10
	s := fmt.Sprint(ids[:min(len(ids), most)])
	if len(ids) > most {
		s += fmt.Sprintf(" and %d more", len(ids)-most)
	}
	return s
}
