// Package dbx is an in-house database layer whose calls go over RPC.
package dbx

import "context"

type Pool struct{}

func (p *Pool) Do(ctx context.Context, query string) error    { return nil }
func (p *Pool) Other(ctx context.Context, query string) error { return nil }

func Send(shard int, query string) error { return nil }
