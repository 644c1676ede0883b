// Package sqlparse is fencelint's judge of SQL text, on the TiDB parser's
// MySQL grammar: it decides whether a statement writes existing rows of a
// fenced table without the fence.
//
// Importing it links the parser into the program and makes fencelint's
// analyzer judge SQL in the program's own process:
//
//	import _ "github.com/fencekit/fencekit/analyzer/sqlparse"
//
// Drivers that run the analyzer in process (the golangci-lint plugin, the
// analyzer's tests) import it. The fencelint command does not: go vet starts
// it once for every package and dependency, and the parser's start-up would
// be paid by each; it asks the fencelint-sql helper (whose main is [Serve])
// instead, and only about text that names a fenced table.
package sqlparse

import (
	"io"

	"github.com/fencekit/fencekit/analyzer/internal/sqlcheck"
	"github.com/pingcap/log"
	"go.uber.org/zap/zapcore"
)

func init() { sqlcheck.Use(judge{}) }

// judge is the in-process judge.
type judge struct{}

func (judge) Check(s string, cfg *sqlcheck.Config) []sqlcheck.Problem { return check(s, cfg) }

func (judge) CheckTemplate(parts []sqlcheck.Part, cfg *sqlcheck.Config) []sqlcheck.Problem {
	return checkTemplate(parts, cfg)
}

// Serve is the fencelint-sql helper's main loop: it answers the questions
// fencelint writes on r, one answer a line on w, until r ends. The parser
// logs through pingcap/log, whose logger writes on standard output (where
// the answers go) unless told otherwise: Serve sends its logs to logs.
func Serve(r io.Reader, w, logs io.Writer) error {
	sink := zapcore.AddSync(logs)
	lg, props, err := log.InitLoggerWithWriteSyncer(&log.Config{Level: "warn"}, sink, sink)
	if err != nil {
		return err
	}
	log.ReplaceGlobals(lg, props)
	return sqlcheck.Serve(judge{}, r, w)
}
