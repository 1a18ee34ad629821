// Package store holds den's implementations of sandbox.Store, the durable
// record of sandboxes, their history, runs and images.
//
// Layout:
//
//	sqlite/     the default store: one SQLite file in WAL mode, written
//	            through a single connection, read through a small pool;
//	            migrations embedded and applied on Open
//	postgres/   (later) the store for fleets, sharing one database
//	storetest/  the conformance suite every store must pass: call
//	            storetest.Run from the implementation's tests
//
// The domain package (internal/sandbox) declares the Store interface and
// imports none of these; dend picks one and wires it in.
package store
