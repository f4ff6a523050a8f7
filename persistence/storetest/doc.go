// Package storetest is the conformance suite of persistence.Store: Run
// checks a Store implementation against the contract written on the
// interface (atomic saves, ErrNotFound and ErrExists, ordering, deletion
// and retention, refusal of invalid snapshots, cancellation, and
// concurrent use). Every store of the module runs it, and so should any
// other implementation:
//
//	func TestConformance(t *testing.T) {
//		storetest.Run(t, func(t *testing.T) persistence.Store {
//			return newEmptyStore(t)
//		})
//	}
//
// NewGlobal builds snapshots of a chosen shape for tests and benchmarks,
// and Equal compares two as a store must preserve them.
package storetest
