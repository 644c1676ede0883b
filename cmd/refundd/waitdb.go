package main

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"time"

	"github.com/go-sql-driver/mysql"
)

// The backoff of waitForDatabase: the first retry after dbRetryFirst, each
// wait twice the last, at most dbRetryMax; each attempt bounded by
// dbPingTimeout.
const (
	dbRetryFirst  = 100 * time.Millisecond
	dbRetryMax    = 5 * time.Second
	dbPingTimeout = 5 * time.Second
)

// waitForDatabase returns once db's server answers. While nothing answers
// at its address (refused, unreachable, timed out: a database still
// starting, or a network partition), it logs one line saying what it waits
// for (the address, the account and the database, never the password) and
// tries again with exponential backoff until ctx ends, when it returns an
// error wrapping ctx's. A server that answers with an error (a wrong
// password, an unknown database, a session the fenced layer refuses) is not
// waited for: its error is returned at once. attempted, when set, is told
// of each failed attempt (tests).
func waitForDatabase(ctx context.Context, db *sql.DB, dsn string, log *slog.Logger, attempted func(n int, err error)) error {
	where := "the database"
	if cfg, err := mysql.ParseDSN(dsn); err == nil {
		where = fmt.Sprintf("the database %q at %s as %s", cfg.DBName, cfg.Addr, cfg.User)
	}
	wait := dbRetryFirst
	started := time.Now()
	for n := 1; ; n++ {
		pctx, cancel := context.WithTimeout(ctx, dbPingTimeout)
		err := db.PingContext(pctx)
		cancel()
		if err == nil {
			if n > 1 {
				log.Info("database reachable: "+where+" answers", "waited", time.Since(started).Round(time.Millisecond))
			}
			return nil
		}
		if ctx.Err() != nil {
			return fmt.Errorf("wait for %s: %w (last error: %w)", where, ctx.Err(), err)
		}
		if !unreachable(err) {
			return fmt.Errorf("connect to %s: %w", where, err)
		}
		if attempted != nil {
			attempted(n, err)
		}
		if n == 1 {
			log.Warn("waiting for "+where+": nothing answers there yet; trying again with backoff (up to every "+dbRetryMax.String()+") until it does or refundd is stopped", "err", err.Error())
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("wait for %s: %w (last error: %w)", where, ctx.Err(), err)
		case <-t.C:
		}
		wait = min(2*wait, dbRetryMax)
	}
}

// unreachable reports whether err says nothing answered at the server's
// address, rather than that the server answered with an error.
func unreachable(err error) bool {
	var me *mysql.MySQLError
	if errors.As(err, &me) {
		return false
	}
	var ne net.Error
	return errors.As(err, &ne) || errors.Is(err, context.DeadlineExceeded) ||
		errors.Is(err, driver.ErrBadConn) || errors.Is(err, mysql.ErrInvalidConn)
}
