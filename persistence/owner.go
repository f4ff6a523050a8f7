package persistence

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/actorsnap/actorsnap/snapshot"
)

// Errors of ownership. Each is wrapped in an *OwnerError that names the
// store's owner; test with errors.Is.
var (
	// ErrOwned is returned by Claim with ClaimNew when the store already
	// holds, or once held, snapshots of a system: a new system would mix
	// its snapshots with them. Restore that system instead (ClaimRestore),
	// or give the new one a namespace of its own.
	ErrOwned = errors.New("persistence: store already holds a system's snapshots")
	// ErrLocked is returned by Claim, and by Save on a store that holds no
	// lease, while another writer holds a lease on the store: there is one
	// writer at a time.
	ErrLocked = errors.New("persistence: store is in use by another writer")
	// ErrFenced is returned by Save through a lease that a later claim has
	// superseded (a store that cannot hold a lock for a lease's whole life,
	// such as PostgreSQL after its connection was lost, fences by
	// generation instead).
	ErrFenced = errors.New("persistence: lease superseded by a later claim")
	// ErrIDsExhausted is returned by Claim when the store's highest id
	// leaves no id for another snapshot. It is snapshot.ErrIDsExhausted,
	// so that errors.Is finds it whichever package said so.
	ErrIDsExhausted = snapshot.ErrIDsExhausted
)

// MaxSystemName bounds the length of a system's name, in bytes.
const MaxSystemName = 255

// Owner describes the system that claimed a store last.
type Owner struct {
	// System is the system's name, as given to Claim. Empty for a store
	// never claimed (such as one written by a build without ownership).
	System string
	// Generation counts the claims of the store: each claim increments
	// it, so a lease of an older generation is superseded.
	Generation uint64
	// Host and PID say which process claimed it.
	Host string
	PID  int
	// Since is when it claimed the store.
	Since time.Time
}

// String names the owner in one line for messages.
func (o Owner) String() string {
	if o.System == "" {
		return "an unnamed system (from a build without store ownership)"
	}
	s := fmt.Sprintf("system %q", o.System)
	if o.PID != 0 {
		s += fmt.Sprintf(" (last claimed by pid %d on %s at %s)", o.PID, o.Host, o.Since.Local().Format(time.DateTime))
	}
	return s
}

// Ownership is what a store says of its owner.
type Ownership struct {
	// Owner is the last claim's owner; zero if the store was never
	// claimed.
	Owner Owner
	// High is the highest snapshot id the store has held, damaged,
	// deleted or set aside ones included; zero if none. A system that
	// claims the store numbers its snapshots after it.
	High snapshot.SnapshotID
	// Live reports whether a writer holds a lease on the store now.
	Live bool
}

// ClaimMode says how Claim treats a store that another system owns.
type ClaimMode uint8

const (
	// ClaimNew claims the store for a new system. It is refused with
	// ErrOwned if the store holds or has held any snapshot.
	ClaimNew ClaimMode = iota
	// ClaimRestore claims the store to continue its snapshots (a
	// restore): it takes the store over from whoever owned it, as long as
	// no writer holds it now.
	ClaimRestore
)

func (m ClaimMode) String() string {
	switch m {
	case ClaimNew:
		return "new"
	case ClaimRestore:
		return "restore"
	}
	return fmt.Sprintf("ClaimMode(%d)", uint8(m))
}

// Lease is a writer's hold on a store, from Claim until Release. While it
// is held no other Claim succeeds, and Saves through other Store values
// fail with ErrLocked (stores fence such Saves where their storage lets
// them: see each store's documentation).
type Lease interface {
	// Owner is the owner this claim recorded.
	Owner() Owner
	// High is the highest snapshot id the store had held when it was
	// claimed: the claimant numbers its snapshots from High()+1.
	High() snapshot.SnapshotID
	// Release gives the store up. The owner record stays, so the store
	// still belongs to the system. Release is idempotent.
	Release(ctx context.Context) error
}

// OwnerError reports a claim or a save refused because of the store's
// owner. It wraps one of ErrOwned, ErrLocked, ErrFenced or
// ErrIDsExhausted.
type OwnerError struct {
	// Store names the store (its directory, or schema).
	Store string
	// Ownership is the store's, as read when refusing.
	Ownership Ownership
	// Err is the sentinel.
	Err error
}

func (e *OwnerError) Error() string {
	o := e.Ownership
	switch {
	case errors.Is(e.Err, ErrOwned):
		return fmt.Sprintf("%v: %s holds snapshots up to %d of %s: restore that system to continue it, or give a new one a namespace of its own",
			e.Err, e.Store, o.High, o.Owner)
	case errors.Is(e.Err, ErrLocked):
		return fmt.Sprintf("%v: %s is held by a writer (its last claim: %s)", e.Err, e.Store, o.Owner)
	case errors.Is(e.Err, ErrIDsExhausted):
		return fmt.Sprintf("%v: %s has held snapshot %d", e.Err, e.Store, o.High)
	}
	return fmt.Sprintf("%v: %s now belongs to %s", e.Err, e.Store, o.Owner)
}

// Unwrap returns the sentinel.
func (e *OwnerError) Unwrap() error { return e.Err }

// CheckSystemName returns why name cannot name a system, or nil: it must
// be non-empty, valid UTF-8 of at most MaxSystemName bytes, without
// control characters.
func CheckSystemName(name string) error {
	switch {
	case name == "":
		return errors.New("persistence: empty system name")
	case len(name) > MaxSystemName:
		return fmt.Errorf("persistence: system name of %d bytes, more than %d", len(name), MaxSystemName)
	case !utf8.ValidString(name):
		return fmt.Errorf("persistence: system name %q is not valid UTF-8", name)
	case strings.ContainsFunc(name, unicode.IsControl):
		return fmt.Errorf("persistence: system name %q holds a control character", name)
	}
	return nil
}

// NewOwner returns the owner a claim by this process records: system,
// the generation after prev's, this host and process, and now. It is for
// implementations of Store.
func NewOwner(system string, prev Owner, now time.Time) Owner {
	host, _ := os.Hostname()
	return Owner{System: system, Generation: prev.Generation + 1, Host: host, PID: os.Getpid(), Since: now.UTC()}
}

// DecideClaim returns why a claim of the store named store, in mode, for
// system, must be refused given the store's ownership o, or nil; the
// refusal is an *OwnerError, which names the store by Redact(store). It is
// for implementations of Store, so that every store decides alike.
func DecideClaim(store string, mode ClaimMode, system string, o Ownership) error {
	if err := CheckSystemName(system); err != nil {
		return err
	}
	refuse := func(err error) error { return &OwnerError{Store: Redact(store), Ownership: o, Err: err} }
	switch {
	case mode != ClaimNew && mode != ClaimRestore:
		return fmt.Errorf("persistence: claim: unknown mode %v", mode)
	case o.Live:
		return refuse(ErrLocked)
	case mode == ClaimNew && o.High > 0:
		return refuse(ErrOwned)
	case o.High >= snapshot.MaxSnapshotID:
		return refuse(ErrIDsExhausted)
	}
	return nil
}

// maxID is the highest snapshot id a store accepts: a system's ids never
// wrap around.
const maxID = snapshot.MaxSnapshotID

// Entry is one entry of a store, as Entries lists them: a complete
// snapshot, or something in the store's place for snapshots that is not
// one.
type Entry struct {
	// ID is the snapshot id the entry's name gives, or zero for an entry
	// whose name holds none (a foreign file).
	ID snapshot.SnapshotID
	// Name is the entry's name in the store: a directory name in a
	// FileStore.
	Name string
	// Damage is nil for a complete snapshot (one List lists), and says
	// why the entry is not one otherwise: a save cut short, a manifest
	// that is damaged or cannot be read, a file that is not a directory,
	// a name the store does not use. Entries does not read snapshots'
	// data: Load does, and reports damage there.
	Damage error
}
