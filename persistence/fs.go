package persistence

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
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
	// Create creates the named file for writing. It fails if the file
	// exists.
	Create(name string) (File, error)
	// Open opens the named file for reading.
	Open(name string) (File, error)
	// Mkdir creates the named directory. It fails if the name exists.
	Mkdir(name string) error
	// MkdirAll creates the named directory and any missing parents.
	MkdirAll(name string) error
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
	// Lock takes an advisory lock on the named file without waiting:
	// exclusive (one holder) or shared (any number of shared holders, and
	// no exclusive one). It fails with an error satisfying
	// errors.Is(err, ErrLockHeld) while a conflicting lock is held through
	// another Lock call, in this process or another. With create a missing
	// file is created; without, a missing file fails with fs.ErrNotExist.
	// unlock releases the lock.
	Lock(name string, exclusive, create bool) (unlock func() error, err error)
}

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

func (osFS) Create(name string) (File, error) {
	return os.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
}

// Open opens name without waiting for a writer (O_NONBLOCK, so that a
// FIFO does not block the caller) and refuses anything but a regular file.
func (osFS) Open(name string) (File, error) {
	f, err := os.OpenFile(name, os.O_RDONLY|syscall.O_NONBLOCK, 0)
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
		return nil, &fs.PathError{Op: "open", Path: name, Err: fmt.Errorf("%w (%v)", ErrNotRegular, info.Mode().Type())}
	}
	return f, nil
}

// Lock uses flock(2): the lock belongs to the open file description, so
// two Lock calls conflict even in one process, and it is released when the
// process dies.
func (osFS) Lock(name string, exclusive, create bool) (func() error, error) {
	flag := os.O_RDONLY
	if create {
		flag = os.O_RDWR | os.O_CREATE
	}
	f, err := os.OpenFile(name, flag|syscall.O_NONBLOCK, 0o644)
	if err != nil {
		return nil, err
	}
	how := syscall.LOCK_SH
	if exclusive {
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
			return nil, &fs.PathError{Op: "lock", Path: name, Err: ErrLockHeld}
		}
		return nil, &fs.PathError{Op: "lock", Path: name, Err: err}
	}
	return f.Close, nil
}

func (osFS) Mkdir(name string) error { return os.Mkdir(name, 0o755) }

func (osFS) MkdirAll(name string) error { return os.MkdirAll(name, 0o755) }

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
