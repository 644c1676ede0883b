package plugin_test

import (
	"path/filepath"
	"testing"

	_ "github.com/fencekit/fencekit/analyzer/plugin"
	"github.com/golangci/plugin-module-register/register"
	"golang.org/x/tools/go/analysis/analysistest"
)

// testdata is the analyzer's, so the plugin is run on the same cases. A
// test runs in its package's directory (runtime.Caller would name a path
// that -trimpath cut).
func testdata() string {
	dir, err := filepath.Abs(filepath.Join("..", "testdata"))
	if err != nil {
		panic(err)
	}
	return dir
}

func TestPluginRunsConfiguredAnalyzer(t *testing.T) {
	t.Parallel()
	newPlugin, err := register.GetPlugin("fencelint")
	if err != nil {
		t.Fatal(err)
	}
	// Settings arrive from YAML as a generic map.
	p, err := newPlugin(map[string]any{"tables": "refund_jobs,payouts:status:version:held_until:declared_version,audit_entries"})
	if err != nil {
		t.Fatal(err)
	}
	if p.GetLoadMode() != register.LoadModeTypesInfo {
		t.Errorf("load mode %q", p.GetLoadMode())
	}
	as, err := p.BuildAnalyzers()
	if err != nil || len(as) != 1 || as[0].Name != "fencelint" {
		t.Fatalf("BuildAnalyzers = %v, %v", as, err)
	}
	analysistest.Run(t, testdata(), as[0], "tables")
}

func TestPluginDefaultsAndDelete(t *testing.T) {
	t.Parallel()
	newPlugin, _ := register.GetPlugin("fencelint")
	p, err := newPlugin(map[string]any{"delete": true})
	if err != nil {
		t.Fatal(err)
	}
	as, _ := p.BuildAnalyzers()
	analysistest.Run(t, testdata(), as[0], "deletes")
}

func TestPluginSinks(t *testing.T) {
	t.Parallel()
	newPlugin, _ := register.GetPlugin("fencelint")
	p, err := newPlugin(map[string]any{"sinks": "runSQL,custom/dbx.Pool.Do,custom/dbx.Send"})
	if err != nil {
		t.Fatal(err)
	}
	as, _ := p.BuildAnalyzers()
	analysistest.Run(t, testdata(), as[0], "custom")
}

func TestPluginRejectsBadSettings(t *testing.T) {
	t.Parallel()
	newPlugin, _ := register.GetPlugin("fencelint")
	for _, raw := range []any{
		map[string]any{"tables": "refund_jobs:state:state"},
		map[string]any{"table": "refund_jobs"}, // unknown key
		map[string]any{"sinks": "a/b"},
		nil,
	} {
		_, err := newPlugin(raw)
		if raw == nil {
			if err != nil {
				t.Errorf("no settings: %v", err)
			}
			continue
		}
		if err == nil {
			t.Errorf("settings %v accepted", raw)
		}
	}
}
