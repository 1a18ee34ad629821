// Package store holds den's implementations of sandbox.Store, the durable
// record of sandboxes, their history, runs and images.
//
// Layout:
//
//	sqlite/     the default store: one SQLite file in WAL mode, written
//	            through a single connection, read through a small pool;
//	            migrations embedded and applied on Open
//	postgres/   the store for fleets: one PostgreSQL database that several
//	            dends may write at once (row versions, unique indexes,
//	            advisory locks, retried transactions); migrations embedded
//	            and applied under an advisory lock; pgtest/ starts a real
//	            server for tests and benchmarks
//	storetest/  the conformance suite every store must pass: call
//	            storetest.Run from the implementation's tests
//
// This package holds what the stores share: the encoding of times and of
// JSON columns, the errors a user sees (records.go), and Records, every
// record of a store, as one store exports them and another imports them
// (transfer.go).
//
// The domain package (internal/sandbox) declares the Store interface and
// imports none of these; dend picks one and wires it in.
package store
