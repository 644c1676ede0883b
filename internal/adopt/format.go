package adopt

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/fencekit/fencekit/internal/term"
	"github.com/fencekit/fencekit/migrations"
)

// Format prints the plan as SQL, each step headed by a comment: what it
// does, what it locks and for how long, how to roll it back.
func (p *Plan) Format(w io.Writer, batch int) error {
	var b strings.Builder
	// Every comment goes through inert: what it says may carry names the
	// team chose, and a newline in one would end the comment.
	fmt.Fprintf(&b, "-- refundd %s: the plan for %s on %s\n", p.Kind, term.Inert(p.Database), term.Inert(p.Server))
	fmt.Fprintf(&b, "-- refund_jobs: %d rows, id %d to %d; backfills in batches of %d ids, each its own transaction\n", p.Rows, p.MinID, p.MaxID, batch)
	if len(p.Preflight) > 0 {
		b.WriteString("\n-- Step 0: pre-flight (checked by plan itself; fix what it marks before apply)\n")
		for _, c := range p.Preflight {
			fmt.Fprintf(&b, "--   [%s] %s: %s\n", c.Status, term.Inert(c.Name), term.Inert(c.Found))
			if c.Fix != "" {
				fmt.Fprintf(&b, "--        do: %s\n", term.Inert(c.Fix))
			}
		}
		b.WriteString("\n")
	}
	for _, n := range p.Notes {
		fmt.Fprintf(&b, "-- NOTE: %s\n", term.Inert(n))
	}
	if len(p.Steps) == 0 {
		b.WriteString("-- nothing to do: the database is adopted\n")
	}
	for i, s := range p.Steps {
		online := "online"
		if !s.Online {
			online = "NOT ONLINE: writes to refund_jobs wait for this step"
		}
		fmt.Fprintf(&b, "\n-- Step %d/%d: %s (%s)\n--   What: %s\n--   Locks: %s\n", i+1, len(p.Steps), s.Name, online, term.Inert(s.What), term.Inert(s.Locks))
		if e := expected(s, p.Rows, batch); e != "" {
			fmt.Fprintf(&b, "--   Expected: %s\n", e)
		}
		fmt.Fprintf(&b, "--   Roll back: %s\n", term.Inert(s.Rollback))
		for i, q := range s.SQL {
			if s.routines && strings.HasPrefix(q, "CREATE") {
				fmt.Fprintf(&b, "DELIMITER //\n%s//\nDELIMITER ;\n", q)
				continue
			}
			fmt.Fprintf(&b, "%s;\n", q)
			if i < len(s.alt) && s.alt[i] != "" {
				fmt.Fprintf(&b, "-- if the server refuses that algorithm (error 1846):\n%s;\n", s.alt[i])
			}
		}
		if c := s.copy; c != nil {
			fmt.Fprintf(&b, "-- the server's own online path first:\n%s;\n", c.online())
			fmt.Fprintf(&b, "-- if the server refuses it (error 1846), a shadow copy instead (an interrupted copy's triggers and %s are dropped first):\n", ShadowTable)
			for _, q := range c.prepare() {
				fmt.Fprintf(&b, "%s;\n", q)
			}
			fmt.Fprintf(&b, "LOCK TABLES %s WRITE, %s WRITE;\n", quote(Table), quote(ShadowTable))
			for _, q := range c.triggers() {
				fmt.Fprintf(&b, "DELIMITER //\n%s//\nDELIMITER ;\n", q)
			}
			b.WriteString("UNLOCK TABLES;\n")
			lo := p.MinID
			fmt.Fprintf(&b, "-- for each range of %d ids, each starting at the next existing id (the first shown):\n%s;\n", batch,
				strings.Replace(strings.Replace(c.chunk(), "?", fmt.Sprint(lo), 1), "?", fmt.Sprint(lo+int64(batch)-1), 1))
			fmt.Fprintf(&b, "-- then, in one consistent snapshot, the row counts of both tables must agree and this must find no row:\n%s;\n", c.differ())
			fmt.Fprintf(&b, "-- ALTER TABLE %s AUTO_INCREMENT = <refund_jobs' next value>;\n%s;\n", quote(ShadowTable), c.swap())
			for _, q := range dropCopyTriggers() {
				fmt.Fprintf(&b, "%s;\n", q)
			}
			fmt.Fprintf(&b, "-- %s is kept: DROP TABLE %s once the adopted table has been checked\n", c.old, quote(c.old))
		}
		for _, q := range s.Batched {
			from := p.MinID
			if s.From != 0 {
				from = max(from, s.From)
			}
			lo, hi := from, from+int64(batch)-1
			fmt.Fprintf(&b, "-- for each range of %d ids from %d to the highest id when the range starts, each range starting at the next existing id (the first shown):\n%s;\n", batch, from,
				strings.Replace(strings.Replace(q, "?", fmt.Sprint(lo), 1), "?", fmt.Sprint(hi), 1))
		}
		if s.baseline {
			fmt.Fprintf(&b, "-- INSERT INTO %s (version %s, type baseline) as the Atlas CLI writes it\n", migrations.RevisionTable, p.Baseline)
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// measured is what adoptbench measured per step for 1M rows on a 2-core
// machine running MariaDB 10.11 under 4 legacy writers (docs/adopting.md):
// the step's duration, and the longest a legacy write waited during it.
var measured = map[string]struct{ took, wait time.Duration }{
	"add-columns":    {85 * time.Millisecond, 88 * time.Millisecond},
	"map-values":     {47 * time.Second, 1960 * time.Millisecond},
	"modify-columns": {46 * time.Second, 680 * time.Millisecond}, // the online copy
	// -blocking-copy: ALGORITHM=COPY, LOCK=SHARED, every write waiting for it.
	"modify-columns-blocking": {11 * time.Second, 11 * time.Second},
	"backfill-times":          {33 * time.Second, 430 * time.Millisecond},
	"drop-defaults":           {140 * time.Millisecond, 112 * time.Millisecond},
	"add-indexes":             {20 * time.Second, 190 * time.Millisecond},
	"backfill-keys":           {11 * time.Second, 260 * time.Millisecond},
	"backfill-ledger":         {23 * time.Second, 1150 * time.Millisecond},
}

// expected scales the measurement to rows: the steps whose work grows
// with the table (copies, index builds, batches) linearly, the waits of a
// batch with the batch size, the copy's wait with the table.
func expected(s Step, rows int64, batch int) string {
	name, like := s.Name, ""
	if !s.Online && s.Name == "modify-columns" {
		name += "-blocking"
	}
	// Rollback's steps are not measured: each does the work of an apply
	// step that is, and says so.
	if m, ok := rollbackLike[s.Name]; ok {
		name, like = m, m
	}
	m, ok := measured[name]
	if !ok {
		return ""
	}
	scale := func(d time.Duration, n int64) time.Duration {
		return time.Duration(float64(d) * float64(n) / 1e6)
	}
	took, wait := scale(m.took, rows), m.wait
	switch {
	case name == "add-columns" || name == "drop-defaults":
		took = m.took // metadata only, whatever the rows
	case !s.Online:
		wait = took
	case len(s.Batched) > 0:
		// A write waits for one batch at most: measured with 5000 ids.
		wait = scale(m.wait, min(int64(batch), max(rows, 1))*200)
	}
	from := "adoptbench's 1M rows"
	if like != "" {
		from = "adoptbench's " + like + " at 1M rows, the same work; not measured itself"
	}
	return fmt.Sprintf("about %s for %d rows, a legacy write waiting up to about %s (scaled from %s, docs/adopting.md)",
		roundDuration(took), rows, roundDuration(wait), from)
}

// rollbackLike is, for each step of rollback whose cost grows with the
// table, the measured apply step that does the same work.
var rollbackLike = map[string]string{
	"save-columns":    "backfill-keys",   // an INSERT … SELECT of one batch's rows
	"restore-columns": "modify-columns",  // the online copy, when the server has no path in place
	"drop-columns":    "add-columns",     // INSTANT
	"drop-indexes":    "drop-defaults",   // metadata only
	"unarchive":       "backfill-ledger", // an INSERT … SELECT
}

func roundDuration(d time.Duration) time.Duration {
	switch {
	case d >= time.Second:
		return d.Round(100 * time.Millisecond)
	case d >= time.Millisecond:
		return d.Round(time.Millisecond)
	}
	return d.Round(time.Microsecond)
}
