package persistence

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"
	"syscall"
)

// FS is the file system a FileStore works through: the operating system's
// (OS) in production, and in tests a MemFS that can simulate a crash or an
// ErrorFS that fails chosen operations. Names are paths in the syntax of
// package path/filepath.
//
// Implementations must be safe for concurrent use. Errors for a missing
// name must satisfy errors.Is(err, fs.ErrNotExist), and for an existing one
// errors.Is(err, fs.ErrExist).
type FS interface {
	// Create creates the named file for writing, with permissions perm
	// (before the umask). It fails if the file exists.
	Create(name string, perm fs.FileMode) (File, error)
	// Open opens the named file for reading.
	Open(name string) (File, error)
	// Mkdir creates the named directory, with permissions perm (before
	// the umask). It fails if the name exists.
	Mkdir(name string, perm fs.FileMode) error
	// MkdirAll creates the named directory and any missing parents, each
	// with permissions perm (before the umask).
	MkdirAll(name string, perm fs.FileMode) error
	// Rename renames oldname to newname atomically. Renaming a directory
	// onto a non-empty directory must fail with an error satisfying
	// errors.Is(err, fs.ErrExist): FileStore relies on it to commit a
	// snapshot only once. (OS refuses an empty one too.)
	Rename(oldname, newname string) error
	// Remove removes the named file or empty directory.
	Remove(name string) error
	// RemoveAll removes name and everything under it. A missing name is
	// not an error.
	RemoveAll(name string) error
	// ReadDir returns the entries of the named directory sorted by name.
	ReadDir(name string) ([]fs.DirEntry, error)
	// Stat describes the named file.
	Stat(name string) (fs.FileInfo, error)
	// Lstat describes the named file; a symbolic link is described, not
	// followed.
	Lstat(name string) (fs.FileInfo, error)
	// SyncDir makes the entries of the named directory durable: the names
	// created, removed and renamed in it survive a crash once it returns.
	SyncDir(name string) error
	// Lock takes an advisory lock on the named directory without waiting:
	// LockExclusive (one holder) or LockShared (any number of shared
	// holders, and no exclusive one). It fails with an error satisfying
	// errors.Is(err, ErrLockHeld) while a conflicting lock is held through
	// another Lock call, in this process or another. unlock releases it.
	// A directory is locked rather than a file in it: a lock file can be
	// deleted while locked (a common reflex with a "stale lock"), after
	// which a second holder locks a new one.
	Lock(dir string, mode LockMode) (unlock func() error, err error)
}

// LockMode is the mode of an FS.Lock.
type LockMode uint8

// Lock modes.
const (
	LockShared LockMode = iota
	LockExclusive
)

// ErrLockHeld is returned by FS.Lock while a conflicting lock is held.
var ErrLockHeld = errors.New("persistence: lock held")

// File is an open file of an FS. Data written survives a crash only once
// Sync has returned.
type File interface {
	io.Reader
	io.Writer
	io.Closer
	// Sync makes the data written so far durable.
	Sync() error
	// Stat describes the file.
	Stat() (fs.FileInfo, error)
}

// OS returns the operating system's file system.
func OS() FS { return osFS{} }

type osFS struct{}

func (osFS) Create(name string, perm fs.FileMode) (File, error) {
	return os.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
}

// Open opens name for reading. Anything but a regular file is refused
// before it is opened (a FIFO would block the open, and opening a device
// may have effects of its own), and checked again once open, without
// having waited (O_NONBLOCK), in case the name changed in between.
func (osFS) Open(name string) (File, error) {
	if info, err := os.Lstat(name); err != nil {
		return nil, err
	} else if !info.Mode().IsRegular() {
		return nil, notRegular(name, info.Mode())
	}
	f, err := os.OpenFile(name, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_NOCTTY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return nil, err
	}
	info, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	if !info.Mode().IsRegular() {
		f.Close()
		return nil, notRegular(name, info.Mode())
	}
	return f, nil
}

// notRegular is the error for a name that is not a regular file.
func notRegular(name string, mode fs.FileMode) error {
	kind := "a " + strings.TrimPrefix(fmt.Sprint(mode.Type()), "-")
	switch {
	case mode.IsDir():
		kind = "a directory"
	case mode&fs.ModeSymlink != 0:
		kind = "a symbolic link"
	case mode&fs.ModeNamedPipe != 0:
		kind = "a FIFO"
	case mode&fs.ModeSocket != 0:
		kind = "a socket"
	case mode&fs.ModeDevice != 0:
		kind = "a device"
	}
	return &fs.PathError{Op: "open", Path: name, Err: fmt.Errorf("%w: it is %s", ErrNotRegular, kind)}
}

// Lock uses flock(2) on the directory: the lock belongs to the open file
// description, so two Lock calls conflict even in one process, and the
// kernel releases it when the process dies.
func (osFS) Lock(dir string, mode LockMode) (func() error, error) {
	f, err := os.Open(dir)
	if err != nil {
		return nil, err
	}
	how := syscall.LOCK_SH
	if mode == LockExclusive {
		how = syscall.LOCK_EX
	}
	for {
		err = syscall.Flock(int(f.Fd()), how|syscall.LOCK_NB)
		if err != syscall.EINTR {
			break
		}
	}
	if err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, &fs.PathError{Op: "lock", Path: dir, Err: ErrLockHeld}
		}
		return nil, &fs.PathError{Op: "lock", Path: dir, Err: err}
	}
	return f.Close, nil
}

func (osFS) Mkdir(name string, perm fs.FileMode) error { return os.Mkdir(name, perm) }

func (osFS) MkdirAll(name string, perm fs.FileMode) error { return os.MkdirAll(name, perm) }

// Rename relies on rename(2): it is atomic, and it refuses to replace a
// non-empty directory (os.Rename also refuses to replace an empty one).
func (osFS) Rename(oldname, newname string) error { return os.Rename(oldname, newname) }

func (osFS) Remove(name string) error { return os.Remove(name) }

func (osFS) RemoveAll(name string) error { return os.RemoveAll(name) }

func (osFS) ReadDir(name string) ([]fs.DirEntry, error) { return os.ReadDir(name) }

func (osFS) Stat(name string) (fs.FileInfo, error) { return os.Stat(name) }

func (osFS) Lstat(name string) (fs.FileInfo, error) { return os.Lstat(name) }

func (osFS) SyncDir(name string) error {
	d, err := os.Open(name)
	if err != nil {
		return err
	}
	if err := d.Sync(); err != nil {
		d.Close()
		return err
	}
	return d.Close()
}
