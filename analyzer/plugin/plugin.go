// Package plugin registers fencelint as a golangci-lint v2 module plugin.
//
// .custom-gcl.yml:
//
//	version: v2.15.0
//	plugins:
//	  - module: github.com/fencekit/fencekit/analyzer
//	    import: github.com/fencekit/fencekit/analyzer/plugin
//	    version: latest
//
// .golangci.yml:
//
//	version: "2"
//	linters:
//	  enable:
//	    - fencelint
//	  settings:
//	    custom:
//	      fencelint:
//	        type: module
//	        description: unfenced writes of fenced tables
//	        settings:
//	          tables: refund_jobs:state:attempt:lease_until:writer_attempt
//	          delete: false
//	          sinks: execLogged,example.com/app/db.Pool.Run
package plugin

import (
	"fmt"

	"github.com/fencekit/fencekit/analyzer"
	_ "github.com/fencekit/fencekit/analyzer/sqlparse" // golangci-lint runs every analyzer in one process: judge SQL in it
	"github.com/golangci/plugin-module-register/register"
	"golang.org/x/tools/go/analysis"
)

func init() { register.Plugin("fencelint", New) }

// Settings are the plugin's settings in .golangci.yml; they mirror the
// command's flags.
type Settings struct {
	// Tables has the syntax of -tables; empty means refund_jobs with
	// state, attempt and lease_until.
	Tables string `json:"tables"`
	// Delete also judges DELETE statements and Ent delete builders.
	Delete bool `json:"delete"`
	// Sinks has the syntax of -sinks: extra SQL sinks for in-house
	// wrappers that analysis cannot see through.
	Sinks string `json:"sinks"`
}

type plugin struct{ a *analysis.Analyzer }

// New is the plugin's constructor, called by golangci-lint with the raw
// settings.
func New(raw any) (register.LinterPlugin, error) {
	s, err := register.DecodeSettings[Settings](raw)
	if err != nil {
		return nil, fmt.Errorf("fencelint settings: %w", err)
	}
	a, err := analyzer.NewWithOptions(analyzer.Options{Tables: s.Tables, Delete: s.Delete, Sinks: s.Sinks})
	if err != nil {
		return nil, fmt.Errorf("fencelint settings: %w", err)
	}
	return &plugin{a}, nil
}

func (p *plugin) BuildAnalyzers() ([]*analysis.Analyzer, error) {
	return []*analysis.Analyzer{p.a}, nil
}

// GetLoadMode asks for type information: the analyzer needs constants'
// values and method sets, and its facts need the dependencies' syntax.
func (p *plugin) GetLoadMode() string { return register.LoadModeTypesInfo }
