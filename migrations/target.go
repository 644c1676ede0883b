package migrations

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"sort"
	"sync"
	"time"

	"ariga.io/atlas/sql/migrate"
	"ariga.io/atlas/sql/schema"
)

// Target is fencekit's schema after the last file of a migration
// directory, replayed on a scratch database: what `refundd adopt` brings an
// existing database to.
type Target struct {
	// Schema is the tables as Atlas inspects them.
	Schema *schema.Schema
	// Routines are the triggers and procedures, procedures first, then the
	// triggers in the order they run, each with the statement that creates
	// it.
	Routines []Routine
	// Version and Description are the last file's: the baseline an adopted
	// database records.
	Version, Description string
}

// Routine is a trigger or a procedure of the Target.
type Routine struct {
	Kind   string // "trigger" or "procedure"
	Name   string
	Table  string // a trigger's table
	Create string // the CREATE statement, without DELIMITER
}

// targets keeps ReplayTarget's answers by server, account and directory
// checksum: replaying every file on a scratch database, and inspecting it
// after each, is most of what planning an adoption costs, and the answer
// depends on nothing else. A failed replay is not kept. replays counts the
// replays run per key (for the tests).
var targets = struct {
	sync.Mutex
	m       map[string]*Target
	replays map[string]int
}{m: map[string]*Target{}, replays: map[string]int{}}

// ReplayTarget replays dir on a scratch database on db's server (dropped
// afterwards; the account needs CREATE and DROP on fencekit_scratch_…) and
// returns the state after its last file. The answer for a server, an
// account and a directory's checksum is kept for the process's life; each
// caller gets a copy of its own, since Atlas's diff writes to the schemas
// it compares (it normalises integer types in place: a shared schema was a
// data race between two plans, seen under -race).
func ReplayTarget(ctx context.Context, db *sql.DB, dir migrate.Dir) (*Target, error) {
	key := targetKey(ctx, db, dir)
	if key != "" {
		targets.Lock()
		t, ok := targets.m[key]
		targets.Unlock()
		if ok {
			return t.clone(), nil
		}
	}
	targets.Lock()
	targets.replays[key]++
	targets.Unlock()
	t, err := replayTarget(ctx, db, dir)
	if err != nil {
		return nil, err
	}
	if key != "" {
		targets.Lock()
		targets.m[key] = t
		targets.Unlock()
	}
	return t.clone(), nil
}

// clone copies t deeply: the schema's graph of tables, columns, types,
// indexes and foreign keys (pointers into it point into the copy), and the
// routines.
func (t *Target) clone() *Target {
	c := *t
	c.Routines = slices.Clone(t.Routines)
	c.Schema = deepCopy(reflect.ValueOf(t.Schema), map[seenKey]reflect.Value{}).Interface().(*schema.Schema)
	return &c
}

// seenKey is a pointer deepCopy has copied: its address and its type.
type seenKey struct {
	addr uintptr
	typ  reflect.Type
}

// deepCopy copies v: a pointer seen before (by address and type) maps to
// its copy (Atlas's schema points both ways, tables to their schema and
// back), and unexported fields are copied as they are: the schema package's
// types have none, and the inspection's own (mysql's showTable) is removed
// from the attributes before the schema is returned.
func deepCopy(v reflect.Value, seen map[seenKey]reflect.Value) reflect.Value {
	switch v.Kind() {
	case reflect.Pointer:
		if v.IsNil() {
			return v
		}
		k := seenKey{v.Pointer(), v.Type()}
		if c, ok := seen[k]; ok {
			return c
		}
		c := reflect.New(v.Elem().Type())
		seen[k] = c
		c.Elem().Set(deepCopy(v.Elem(), seen))
		return c
	case reflect.Interface:
		if v.IsNil() {
			return v
		}
		c := reflect.New(v.Type()).Elem()
		c.Set(deepCopy(v.Elem(), seen))
		return c
	case reflect.Slice:
		if v.IsNil() {
			return v
		}
		c := reflect.MakeSlice(v.Type(), v.Len(), v.Len())
		for i := range v.Len() {
			c.Index(i).Set(deepCopy(v.Index(i), seen))
		}
		return c
	case reflect.Array:
		c := reflect.New(v.Type()).Elem()
		for i := range v.Len() {
			c.Index(i).Set(deepCopy(v.Index(i), seen))
		}
		return c
	case reflect.Map:
		if v.IsNil() {
			return v
		}
		c := reflect.MakeMapWithSize(v.Type(), v.Len())
		for it := v.MapRange(); it.Next(); {
			c.SetMapIndex(deepCopy(it.Key(), seen), deepCopy(it.Value(), seen))
		}
		return c
	case reflect.Struct:
		c := reflect.New(v.Type()).Elem()
		c.Set(v)
		for i := range v.NumField() {
			if c.Field(i).CanSet() {
				c.Field(i).Set(deepCopy(v.Field(i), seen))
			}
		}
		return c
	default:
		return v
	}
}

// targetKey names db's server, its account and dir's files, or is empty
// when one cannot be read (the replay then runs, unkept).
func targetKey(ctx context.Context, db *sql.DB, dir migrate.Dir) string {
	sum, err := dir.Checksum()
	if err != nil {
		return ""
	}
	var version, host, user string
	var port int64
	if err := db.QueryRowContext(ctx, "SELECT VERSION(), @@hostname, @@port, CURRENT_USER()").Scan(&version, &host, &port, &user); err != nil {
		return ""
	}
	return fmt.Sprintf("%s\x00%s\x00%d\x00%s\x00%s", version, host, port, user, sum.Sum())
}

func replayTarget(ctx context.Context, db *sql.DB, dir migrate.Dir) (*Target, error) {
	var (
		last *snapshot
		file string
	)
	err := replay(ctx, db, dir, func(f string, _ migrate.Driver, snap *snapshot) (bool, error) {
		last, file = snap, f
		return true, nil
	})
	if err != nil {
		return nil, err
	}
	if last == nil {
		return nil, errors.New("replay migrations: the directory has no files")
	}
	f := migrate.NewLocalFile(file, nil)
	t := &Target{Schema: last.schema, Version: f.Version(), Description: f.Desc()}
	keys := slices.Sorted(maps.Keys(last.routines))
	sort.SliceStable(keys, func(i, j int) bool {
		a, b := last.routines[keys[i]], last.routines[keys[j]]
		if (a.kind == "procedure") != (b.kind == "procedure") {
			return a.kind == "procedure"
		}
		return a.order < b.order
	})
	for _, k := range keys {
		r := last.routines[k]
		t.Routines = append(t.Routines, Routine{Kind: r.kind, Name: r.name, Table: r.table, Create: r.create})
	}
	return t, nil
}

// RecordBaseline records version as the Atlas baseline of the database db
// is connected to, in the CLI's revision table and format (the table is
// created when missing), as `atlas migrate apply --baseline version` would:
// Apply and the Atlas CLI then treat every file up to version as applied.
// It does nothing when the database already has revisions, and refuses
// when they do not end at version.
func RecordBaseline(ctx context.Context, db *sql.DB, version, description string) error {
	conn, err := db.Conn(ctx)
	if err != nil {
		return fmt.Errorf("record baseline: connect: %w", err)
	}
	defer conn.Close()
	rrw := &revisions{conn: conn}
	if err := rrw.init(ctx); err != nil {
		return err
	}
	revs, err := rrw.ReadRevisions(ctx)
	if err != nil {
		return err
	}
	if len(revs) > 0 {
		if last := revs[len(revs)-1]; last.Version != version || last.Applied != last.Total {
			return fmt.Errorf("record baseline %s: the database's revisions end at %s (applied %d of %d)", version, last.Version, last.Applied, last.Total)
		}
		return nil
	}
	return rrw.WriteRevision(ctx, &migrate.Revision{
		Version: version, Description: description, Type: migrate.RevisionTypeBaseline,
		ExecutedAt: time.Now(), OperatorVersion: operatorVersion,
	})
}
