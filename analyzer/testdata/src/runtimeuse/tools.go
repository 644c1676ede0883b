package runtimeuse

import (
	//fencelint:allow a tool that prints the generated statements reads the runtime's table
	fencedrt2 "github.com/fencekit/fencekit/fencedwrite/fencedrt"
)

var _ = fencedrt2.Registered("refund_jobs")
