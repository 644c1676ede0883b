// Package devdb reaches the MySQL-compatible server that tests and
// development tools use, and creates throw-away databases on it.
package devdb

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"regexp"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"
)

// EnvDSN names the environment variable holding the server's DSN in
// go-sql-driver/mysql form; its database name, if any, is ignored.
const EnvDSN = "FENCEKIT_TEST_DSN"

// DefaultDSN is the local server that scripts/ensure-db.sh brings up.
const DefaultDSN = "root@tcp(127.0.0.1:3306)/"

// ServerConfig returns the server's configuration, from EnvDSN or DefaultDSN,
// without a database name.
func ServerConfig() (*mysql.Config, error) {
	dsn := os.Getenv(EnvDSN)
	if dsn == "" {
		dsn = DefaultDSN
	}
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		return nil, fmt.Errorf("parse %s: %w", EnvDSN, err)
	}
	cfg.DBName = ""
	if cfg.Timeout == 0 {
		cfg.Timeout = 5 * time.Second
	}
	return cfg, nil
}

// DSN returns cfg's DSN for the named database.
func DSN(cfg *mysql.Config, db string) string {
	c := cfg.Clone()
	c.DBName = db
	return c.FormatDSN()
}

// AtlasURL returns cfg as an Atlas URL (mysql://user:pass@host:port/db).
func AtlasURL(cfg *mysql.Config, db string) (string, error) {
	if cfg.Net != "tcp" {
		return "", fmt.Errorf("atlas url: only tcp servers are supported, got %q", cfg.Net)
	}
	u := url.URL{Scheme: "mysql", Host: cfg.Addr, Path: "/" + db}
	if cfg.Passwd != "" {
		u.User = url.UserPassword(cfg.User, cfg.Passwd)
	} else {
		u.User = url.User(cfg.User)
	}
	return u.String(), nil
}

var unsafeName = regexp.MustCompile(`[^a-z0-9_]+`)

// Name returns a fresh database name that starts with prefix.
func Name(prefix string) string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	p := unsafeName.ReplaceAllString(strings.ToLower(prefix), "_")
	if len(p) > 40 {
		p = p[:40]
	}
	return "fk_" + p + "_" + hex.EncodeToString(b[:])
}

// Create creates a fresh, empty database whose name starts with prefix, and
// returns its name and a function that drops it.
func Create(ctx context.Context, cfg *mysql.Config, prefix string) (name string, drop func(context.Context) error, err error) {
	root, err := sql.Open("mysql", DSN(cfg, ""))
	if err != nil {
		return "", nil, err
	}
	defer root.Close()
	name = Name(prefix)
	if _, err := root.ExecContext(ctx, "CREATE DATABASE `"+name+"` CHARACTER SET utf8mb4 COLLATE utf8mb4_bin"); err != nil {
		return "", nil, fmt.Errorf("create database %s on %s: %w", name, cfg.Addr, err)
	}
	drop = func(ctx context.Context) error {
		db, err := sql.Open("mysql", DSN(cfg, ""))
		if err != nil {
			return err
		}
		defer db.Close()
		if _, err := db.ExecContext(ctx, "DROP DATABASE IF EXISTS `"+name+"`"); err != nil {
			return fmt.Errorf("drop database %s: %w", name, err)
		}
		return nil
	}
	return name, drop, nil
}
