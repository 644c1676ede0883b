// Package brokertest gives tests the RabbitMQ broker they run against, and
// orders the tests of every package that share it: a test that restarts
// the broker runs alone.
package brokertest

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// URL is the test broker's: $FENCEKIT_TEST_AMQP, or the local broker that
// scripts/ensure-rabbitmq.sh starts.
func URL() string {
	if u := os.Getenv("FENCEKIT_TEST_AMQP"); u != "" {
		return u
	}
	return "amqp://guest:guest@127.0.0.1:5672/"
}

// Shared marks t as using the broker until it ends: any number of tests,
// in any package's test binary, share it; a test that restarts it
// (Exclusive) waits for them, and they for it.
func Shared(t testing.TB) { lock(t, syscall.LOCK_SH) }

// Exclusive marks t as the only test using the broker until it ends: it
// may restart it.
func Exclusive(t testing.TB) { lock(t, syscall.LOCK_EX) }

// lock takes an flock on a file every test binary of this machine opens:
// go test runs packages in separate processes at once.
func lock(t testing.TB, how int) {
	t.Helper()
	name := filepath.Join(os.TempDir(), "fencekit-rabbitmq-tests.lock")
	f, err := os.OpenFile(name, os.O_CREATE|os.O_RDWR, 0o666)
	if err != nil {
		t.Fatalf("open the broker's test lock %s: %v", name, err)
	}
	if err := syscall.Flock(int(f.Fd()), how); err != nil {
		f.Close()
		t.Fatalf("lock %s: %v", name, err)
	}
	t.Cleanup(func() {
		_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		f.Close()
	})
}
