package main

import (
	"io"
	"log/slog"
)

// newLogger is refundd's JSON logger on w: a line per event, durations
// written as Go writes them ("2.5s", "150ms"), not as nanoseconds.
func newLogger(w io.Writer) *slog.Logger {
	return slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{ReplaceAttr: humanDurations}))
}

// humanDurations is a slog.HandlerOptions.ReplaceAttr that writes every
// time.Duration attribute with its String method.
func humanDurations(_ []string, a slog.Attr) slog.Attr {
	if a.Value.Kind() == slog.KindDuration {
		a.Value = slog.StringValue(a.Value.Duration().String())
	}
	return a
}
