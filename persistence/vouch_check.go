//go:build race || invariants

package persistence

// checkVouched: see vouch.go.
const checkVouched = true
