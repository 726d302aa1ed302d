// Package pgstore is a history.Store on PostgreSQL: the path past one
// machine (DESIGN.md §11), where several Cairn servers share one database.
// The full description — use, schema, group commit, fencing, settings and
// what it keeps to for CockroachDB and YugabyteDB — follows in this
// comment as the package grows.
package pgstore
