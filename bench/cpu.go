package main

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// cpuUse is the processor time spent during a measurement, in seconds: this
// process (the queue's client side), the database servers' processes, and
// the whole machine (busy time of every core). The servers are shared with
// other clients of this machine, so their figures are upper bounds.
type cpuUse struct {
	Wall     float64 `json:"wall_s"`
	Client   float64 `json:"client_s"`
	MariaDB  float64 `json:"mariadb_s"`
	Postgres float64 `json:"postgres_s"`
	Machine  float64 `json:"machine_busy_s"`
}

type cpuMeter struct {
	at    time.Time
	start cpuUse
}

const clockTicks = 100 // USER_HZ on Linux

func startCPU() *cpuMeter { return &cpuMeter{at: time.Now(), start: readCPU()} }

func (m *cpuMeter) stop() cpuUse {
	end := readCPU()
	return cpuUse{
		Wall:     time.Since(m.at).Seconds(),
		Client:   end.Client - m.start.Client,
		MariaDB:  end.MariaDB - m.start.MariaDB,
		Postgres: end.Postgres - m.start.Postgres,
		Machine:  end.Machine - m.start.Machine,
	}
}

func readCPU() cpuUse {
	var u cpuUse
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) == nil {
		u.Client = tv(ru.Utime) + tv(ru.Stime)
	}
	procs, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, p := range procs {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		comm, secs, ok := procCPU(string(b))
		if !ok {
			continue
		}
		switch comm {
		case "mariadbd", "mysqld":
			u.MariaDB += secs
		case "postgres":
			u.Postgres += secs
		}
	}
	if b, err := os.ReadFile("/proc/stat"); err == nil {
		line, _, _ := strings.Cut(string(b), "\n")
		f := strings.Fields(line)
		for _, i := range []int{1, 2, 3, 6, 7} { // user, nice, system, irq, softirq
			if i < len(f) {
				n, _ := strconv.ParseFloat(f[i], 64)
				u.Machine += n / clockTicks
			}
		}
	}
	return u
}

// procCPU parses /proc/<pid>/stat: the command and utime+stime.
func procCPU(stat string) (comm string, secs float64, ok bool) {
	lo, hi := strings.IndexByte(stat, '('), strings.LastIndexByte(stat, ')')
	if lo < 0 || hi < lo {
		return "", 0, false
	}
	comm = stat[lo+1 : hi]
	f := strings.Fields(stat[hi+1:])
	// After the command: state is field 3 of the whole line, utime 14, stime 15.
	if len(f) < 13 {
		return "", 0, false
	}
	ut, _ := strconv.ParseFloat(f[11], 64)
	st, _ := strconv.ParseFloat(f[12], 64)
	return comm, (ut + st) / clockTicks, true
}

func tv(t syscall.Timeval) float64 { return float64(t.Sec) + float64(t.Usec)/1e6 }

// vmRSS returns a process's resident memory (VmRSS) and its peak (VmHWM),
// in bytes.
func vmRSS(pid int) (rss, hwm int64, err error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0, 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		name, val, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		f := strings.Fields(val)
		if len(f) == 0 {
			continue
		}
		kb, _ := strconv.ParseInt(f[0], 10, 64)
		switch name {
		case "VmRSS":
			rss = kb * 1024
		case "VmHWM":
			hwm = kb * 1024
		}
	}
	return rss, hwm, nil
}
