// Package entext stands for the generator: part of the fenced layer, it may
// use its runtime.
package entext

import "github.com/fencekit/fencekit/fencedwrite/fencedrt"

var _ = fencedrt.Registered("refund_jobs")
