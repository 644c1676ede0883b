// Package refundjob is a stand-in for Ent's generated per-entity package.
package refundjob

// Table holds the table name of the refundjob in the database.
const Table = "refund_jobs"
