package main

import (
	"context"
	"database/sql"
	"os"
	"runtime"
	"strconv"
	"strings"

	"github.com/fencekit/fencekit/internal/devdb"
)

// machine describes where the figures were taken.
type machine struct {
	CPU        string  `json:"cpu"`
	Cores      int     `json:"cores"`
	MemoryGiB  float64 `json:"memory_gib"`
	Go         string  `json:"go"`
	MariaDB    string  `json:"mariadb"`
	PostgreSQL string  `json:"postgresql"`
	LoadStart  float64 `json:"load_avg_1m_start"`
	LoadEnd    float64 `json:"load_avg_1m_end"`
}

func describeMachine(ctx context.Context) machine {
	m := machine{Cores: runtime.NumCPU(), Go: runtime.Version(), LoadStart: loadAvg()}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if name, val, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(name) == "model name" {
				m.CPU = strings.TrimSpace(val)
				break
			}
		}
	}
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if rest, ok := strings.CutPrefix(line, "MemTotal:"); ok {
				kb, _ := strconv.ParseFloat(strings.Fields(rest)[0], 64)
				m.MemoryGiB = kb / (1 << 20)
			}
		}
	}
	if cfg, err := devdb.ServerConfig(); err == nil {
		if db, err := sql.Open("mysql", devdb.DSN(cfg, "")); err == nil {
			_ = db.QueryRowContext(ctx, "SELECT VERSION()").Scan(&m.MariaDB)
			db.Close()
		}
	}
	return m
}

// loadAvg is the machine's one-minute load average.
func loadAvg() float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 0
	}
	v, _ := strconv.ParseFloat(f[0], 64)
	return v
}
