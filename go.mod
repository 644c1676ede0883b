module github.com/fencekit/fencekit

go 1.26.0

require (
	entgo.io/ent v0.14.5
	github.com/fencekit/fencekit/analyzer v0.0.0-00010101000000-000000000000
	github.com/go-sql-driver/mysql v1.10.2
)

require (
	filippo.io/edwards25519 v1.2.0 // indirect
	github.com/google/uuid v1.6.0 // indirect
	github.com/stretchr/testify v1.12.1 // indirect
)
