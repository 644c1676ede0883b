// Package runtimeuse is a service that reaches for the fenced layer's
// runtime instead of the generated client.
package runtimeuse

import (
	"github.com/fencekit/fencekit/fencedwrite/fencedrt" // want `import of the fenced layer's runtime "github.com/fencekit/fencekit/fencedwrite/fencedrt" outside generated code`

	rt "github.com/fencekit/fencekit/fencedwrite/fencedrt" // want `outside generated code`
)

var (
	_ fencedrt.Lease
	_ = rt.Registered("refund_jobs")
)
