//go:build !race && !invariants

package persistence

// checkVouched makes the decoder run Verify also on the snapshots its own
// check vouches for, and panic if Verify disagrees. It costs what the
// check saves, so it is on only under the race detector or the invariants
// build tag (see vouch_check.go).
const checkVouched = false
