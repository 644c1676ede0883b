package fencedwrite_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/fencekit/fencekit/fencedwrite"
)

func TestDSNForcesTheFencedSettings(t *testing.T) {
	t.Parallel()
	dsn, err := fencedwrite.DSN("app:secret@tcp(db:3306)/payments?tls=skip-verify&parseTime=true&loc=UTC&readTimeout=45s", fencedwrite.DSNOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		t.Fatal(err)
	}
	if !cfg.ParseTime || !cfg.ClientFoundRows || !cfg.InterpolateParams || cfg.Loc != time.UTC {
		t.Errorf("DSN %s does not force parseTime, clientFoundRows, interpolateParams and loc=UTC", dsn)
	}
	if cfg.Timeout != fencedwrite.DefaultDialTimeout || cfg.ReadTimeout != 45*time.Second || cfg.WriteTimeout != fencedwrite.DefaultWriteTimeout {
		t.Errorf("network timeouts %v/%v/%v, want the defaults and the DSN's readTimeout", cfg.Timeout, cfg.ReadTimeout, cfg.WriteTimeout)
	}
	if cfg.TLSConfig != "skip-verify" {
		t.Errorf("DSN %s lost tls=skip-verify", dsn)
	}
	for k, want := range map[string]string{"innodb_lock_wait_timeout": "5", "wait_timeout": "600", "time_zone": "'+00:00'"} {
		if got := cfg.Params[k]; got != want {
			t.Errorf("session %s = %q, want %q", k, got, want)
		}
	}
	if cfg.User != "app" || cfg.Passwd != "secret" || cfg.DBName != "payments" || cfg.Addr != "db:3306" {
		t.Errorf("DSN lost the caller's settings: %+v", cfg)
	}
	if !strings.Contains(dsn, "timeTruncate=1") {
		t.Errorf("DSN %s does not truncate times to microseconds", dsn)
	}
}

func TestBadSettingsNameTheField(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		err  error
		want []string
	}{
		{errorOf(fencedwrite.DSN("root@tcp(127.0.0.1:3306)/x", fencedwrite.DSNOptions{LockWaitTimeout: 1500 * time.Millisecond})),
			[]string{"DSNOptions.LockWaitTimeout: must be a whole number of seconds"}},
		{errorOf(fencedwrite.DSN("root@tcp(127.0.0.1:3306)/x", fencedwrite.DSNOptions{LockWaitTimeout: 40 * time.Second})),
			[]string{"DSNOptions.ReadTimeout: must exceed LockWaitTimeout"}},
		{errorOf(fencedwrite.DSN("not a dsn", fencedwrite.DSNOptions{})), []string{"fenced dsn: dsn: cannot be read"}},
		{fencedwrite.ClaimOptions{Lease: -time.Second, SkewMargin: -1}.Validate(),
			[]string{"ClaimOptions.Lease: must be at least 1µs", "ClaimOptions.SkewMargin: must not be negative"}},
		{fencedwrite.ClaimOptions{KeyRetention: time.Hour, SkewMargin: 2 * time.Hour}.Validate(),
			[]string{"ClaimOptions.KeyRetention: must exceed ProviderTimeout + SkewMargin"}},
	} {
		if tc.err == nil {
			t.Errorf("no error, want %q", tc.want)
			continue
		}
		for _, want := range tc.want {
			if !strings.Contains(tc.err.Error(), want) {
				t.Errorf("error %q lacks %q", tc.err, want)
			}
		}
	}
	if err := (fencedwrite.ClaimOptions{}).Validate(); err != nil {
		t.Errorf("the defaults do not validate: %v", err)
	}
	if err := (fencedwrite.ClaimOptions{Lease: -1}).Validate(); !errors.Is(err, fencedwrite.ErrInvalid) {
		t.Errorf("a bad option is %v, want ErrInvalid", err)
	}
}

func errorOf(_ string, err error) error { return err }
