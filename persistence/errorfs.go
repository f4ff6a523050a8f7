package persistence

import (
	"errors"
	"fmt"
	"io/fs"
	"sync"
)

// Op is a kind of file-system operation, as counted by ErrorFS.
type Op uint8

// Operation kinds. OpAny stands for every kind.
const (
	OpAny     Op = iota
	OpCreate     // FS.Create
	OpOpen       // FS.Open
	OpRead       // File.Read
	OpWrite      // File.Write
	OpSync       // File.Sync
	OpClose      // File.Close
	OpStat       // FS.Stat and File.Stat
	OpMkdir      // FS.Mkdir and FS.MkdirAll
	OpRename     // FS.Rename
	OpRemove     // FS.Remove and FS.RemoveAll
	OpReadDir    // FS.ReadDir
	OpSyncDir    // FS.SyncDir
	OpLock       // FS.Lock
	numOps
)

var opNames = [numOps]string{"any", "create", "open", "read", "write", "sync", "close", "stat", "mkdir", "rename", "remove", "readdir", "syncdir", "lock"}

// String returns the kind's name.
func (o Op) String() string {
	if o < numOps {
		return opNames[o]
	}
	return fmt.Sprintf("op(%d)", uint8(o))
}

// ErrInjected is the error an ErrorFS returns for the operation it fails,
// unless its Fault names another.
var ErrInjected = errors.New("persistence: injected fault")

// Fault says which operation an ErrorFS fails.
type Fault struct {
	// Op is the kind of operation counted; OpAny counts every operation.
	Op Op
	// N is the number, from 1, of the operation of kind Op that fails.
	// Zero fails nothing: the ErrorFS only counts.
	N int
	// Sticky makes every operation after the failed one fail too, as if
	// the machine had crashed.
	Sticky bool
	// Err is the error returned; nil means ErrInjected.
	Err error
	// Name, if set, limits the fault to operations on that name: only
	// they are counted for N, and only they fail when Sticky.
	Name string
}

// ErrorFS is an FS for tests that passes operations to another FS, counts
// them by kind, and fails the one its Fault names. A failed operation has no
// effect, except Close, which closes the file anyway. It is safe for
// concurrent use.
type ErrorFS struct {
	base  FS
	fault Fault

	mu      sync.Mutex
	counts  [numOps]int
	matched int // operations of the fault's kind on its Name
	hit     bool
}

// NewErrorFS returns an ErrorFS over base that injects f.
func NewErrorFS(base FS, f Fault) *ErrorFS {
	if f.Err == nil {
		f.Err = ErrInjected
	}
	return &ErrorFS{base: base, fault: f}
}

// SetFault replaces the fault to inject and starts counting afresh, so a
// test can let a store open before arming it.
func (e *ErrorFS) SetFault(f Fault) {
	if f.Err == nil {
		f.Err = ErrInjected
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.fault, e.counts, e.matched, e.hit = f, [numOps]int{}, 0, false
}

// Count returns the number of operations of kind op seen so far, failed
// ones included.
func (e *ErrorFS) Count(op Op) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.counts[op]
}

// Injected reports whether the fault has been injected.
func (e *ErrorFS) Injected() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.hit
}

func (e *ErrorFS) check(op Op, name string) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.counts[op]++
	e.counts[OpAny]++
	if e.fault.Name != "" && name != e.fault.Name {
		return nil
	}
	if e.hit && e.fault.Sticky {
		return &fs.PathError{Op: op.String(), Path: name, Err: e.fault.Err}
	}
	n := e.counts[e.fault.Op]
	if e.fault.Name != "" && (e.fault.Op == OpAny || e.fault.Op == op) {
		e.matched++
		n = e.matched
	}
	if !e.hit && e.fault.N > 0 && (e.fault.Op == OpAny || e.fault.Op == op) && n == e.fault.N {
		e.hit = true
		return &fs.PathError{Op: op.String(), Path: name, Err: e.fault.Err}
	}
	return nil
}

// Create implements FS.
func (e *ErrorFS) Create(name string, perm fs.FileMode) (File, error) {
	if err := e.check(OpCreate, name); err != nil {
		return nil, err
	}
	f, err := e.base.Create(name, perm)
	if err != nil {
		return nil, err
	}
	return &errorFile{e: e, f: f, name: name}, nil
}

// Open implements FS.
func (e *ErrorFS) Open(name string) (File, error) {
	if err := e.check(OpOpen, name); err != nil {
		return nil, err
	}
	f, err := e.base.Open(name)
	if err != nil {
		return nil, err
	}
	return &errorFile{e: e, f: f, name: name}, nil
}

// Mkdir implements FS.
func (e *ErrorFS) Mkdir(name string, perm fs.FileMode) error {
	if err := e.check(OpMkdir, name); err != nil {
		return err
	}
	return e.base.Mkdir(name, perm)
}

// MkdirAll implements FS.
func (e *ErrorFS) MkdirAll(name string, perm fs.FileMode) error {
	if err := e.check(OpMkdir, name); err != nil {
		return err
	}
	return e.base.MkdirAll(name, perm)
}

// Rename implements FS.
func (e *ErrorFS) Rename(oldname, newname string) error {
	if err := e.check(OpRename, oldname); err != nil {
		return err
	}
	return e.base.Rename(oldname, newname)
}

// Remove implements FS.
func (e *ErrorFS) Remove(name string) error {
	if err := e.check(OpRemove, name); err != nil {
		return err
	}
	return e.base.Remove(name)
}

// RemoveAll implements FS.
func (e *ErrorFS) RemoveAll(name string) error {
	if err := e.check(OpRemove, name); err != nil {
		return err
	}
	return e.base.RemoveAll(name)
}

// ReadDir implements FS.
func (e *ErrorFS) ReadDir(name string) ([]fs.DirEntry, error) {
	if err := e.check(OpReadDir, name); err != nil {
		return nil, err
	}
	return e.base.ReadDir(name)
}

// Stat implements FS.
func (e *ErrorFS) Stat(name string) (fs.FileInfo, error) {
	if err := e.check(OpStat, name); err != nil {
		return nil, err
	}
	return e.base.Stat(name)
}

// SyncDir implements FS.
func (e *ErrorFS) SyncDir(name string) error {
	if err := e.check(OpSyncDir, name); err != nil {
		return err
	}
	return e.base.SyncDir(name)
}

type errorFile struct {
	e    *ErrorFS
	f    File
	name string
}

func (f *errorFile) Read(p []byte) (int, error) {
	if err := f.e.check(OpRead, f.name); err != nil {
		return 0, err
	}
	return f.f.Read(p)
}

func (f *errorFile) Write(p []byte) (int, error) {
	if err := f.e.check(OpWrite, f.name); err != nil {
		return 0, err
	}
	return f.f.Write(p)
}

func (f *errorFile) Sync() error {
	if err := f.e.check(OpSync, f.name); err != nil {
		return err
	}
	return f.f.Sync()
}

// Close always closes the underlying file, so that an injected failure
// leaks nothing; the error is still reported.
func (f *errorFile) Close() error {
	err := f.e.check(OpClose, f.name)
	if cerr := f.f.Close(); err == nil {
		err = cerr
	}
	return err
}

func (f *errorFile) Stat() (fs.FileInfo, error) {
	if err := f.e.check(OpStat, f.name); err != nil {
		return nil, err
	}
	return f.f.Stat()
}

// Lock implements FS.
func (e *ErrorFS) Lock(dir string, mode LockMode) (func() error, error) {
	if err := e.check(OpLock, dir); err != nil {
		return nil, err
	}
	return e.base.Lock(dir, mode)
}

// Lstat implements FS.
func (e *ErrorFS) Lstat(name string) (fs.FileInfo, error) {
	if err := e.check(OpStat, name); err != nil {
		return nil, err
	}
	return e.base.Lstat(name)
}
