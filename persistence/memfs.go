package persistence

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"
)

// MemFS is an in-memory FS for tests that keeps apart what was written and
// what was made durable, like pebble's strict in-memory vfs: a file's data
// is durable once File.Sync returns, and a directory's entries (names
// created, removed, renamed) once SyncDir on that directory returns.
// CrashClone returns the file system a machine would find after a crash.
//
// The zero value is not usable; call NewMemFS. A MemFS is safe for
// concurrent use.
type MemFS struct {
	mu    sync.Mutex
	root  *memNode
	locks map[*memNode]*memLock // advisory locks held, by file
}

// memLock is the state of one file's advisory lock.
type memLock struct {
	shared    int
	exclusive bool
}

type memNode struct {
	dir   bool
	perm  fs.FileMode
	mtime time.Time
	// A file's data now and as of its last Sync.
	data, synced []byte
	// A directory's entries now and as of its last SyncDir.
	children, durable map[string]*memNode
}

// NewMemFS returns an empty MemFS whose root directory, "/", exists and is
// durable. Relative names are taken from the root.
func NewMemFS() *MemFS {
	return &MemFS{root: newMemDir(0o755)}
}

func newMemDir(perm fs.FileMode) *memNode {
	return &memNode{dir: true, perm: perm.Perm(), mtime: time.Now(), children: map[string]*memNode{}, durable: map[string]*memNode{}}
}

// CrashMode says what survives a simulated crash besides what was synced.
type CrashMode uint8

const (
	// CrashStrict keeps only synced file data and synced directory entries.
	CrashStrict CrashMode = iota
	// CrashKeepMetadata keeps every directory entry as it was at the crash
	// (as a journaling file system that orders metadata but not data may),
	// and for each file its synced data plus a random part of what was
	// written after.
	CrashKeepMetadata
)

// String returns the mode's name.
func (m CrashMode) String() string {
	switch m {
	case CrashStrict:
		return "strict"
	case CrashKeepMetadata:
		return "keep-metadata"
	default:
		return fmt.Sprintf("crashmode(%d)", uint8(m))
	}
}

// CrashClone returns the file system as a machine would find it after
// crashing now, according to mode; seed chooses the random parts, so a run
// replays. m itself is unchanged: open files keep working on it, and
// nothing done to m afterwards reaches the clone.
func (m *MemFS) CrashClone(mode CrashMode, seed uint64) *MemFS {
	m.mu.Lock()
	defer m.mu.Unlock()
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	memo := map[*memNode]*memNode{}
	var clone func(n *memNode) *memNode
	clone = func(n *memNode) *memNode {
		if c, ok := memo[n]; ok {
			return c
		}
		c := &memNode{dir: n.dir, perm: n.perm, mtime: n.mtime}
		memo[n] = c
		if n.dir {
			src := n.durable
			if mode == CrashKeepMetadata {
				src = n.children
			}
			c.children = make(map[string]*memNode, len(src))
			for _, name := range slices.Sorted(maps.Keys(src)) {
				c.children[name] = clone(src[name])
			}
			c.durable = maps.Clone(c.children)
			return c
		}
		keep := n.synced
		if mode == CrashKeepMetadata && len(n.data) > len(n.synced) && bytes.HasPrefix(n.data, n.synced) {
			keep = n.data[:len(n.synced)+rng.IntN(len(n.data)-len(n.synced)+1)]
		}
		c.data = slices.Clone(keep)
		c.synced = slices.Clone(keep)
		return c
	}
	return &MemFS{root: clone(m.root)}
}

func memSplit(name string) []string {
	name = strings.Trim(filepath.ToSlash(filepath.Clean("/"+name)), "/")
	if name == "" {
		return nil
	}
	return strings.Split(name, "/")
}

func memErr(op, name string, err error) error { return &fs.PathError{Op: op, Path: name, Err: err} }

var (
	errMemNotDir   = errors.New("not a directory")
	errMemIsDir    = errors.New("is a directory")
	errMemNotEmpty = fmt.Errorf("directory not empty: %w", fs.ErrExist)
	errMemClosed   = fs.ErrClosed
	errMemReadOnly = errors.New("file not open for writing")
)

// lookup returns the node at name. m.mu is held.
func (m *MemFS) lookup(op, name string) (*memNode, error) {
	n := m.root
	for _, part := range memSplit(name) {
		if !n.dir {
			return nil, memErr(op, name, errMemNotDir)
		}
		c, ok := n.children[part]
		if !ok {
			return nil, memErr(op, name, fs.ErrNotExist)
		}
		n = c
	}
	return n, nil
}

// parent returns the directory holding name, and name's last element.
// m.mu is held.
func (m *MemFS) parent(op, name string) (*memNode, string, error) {
	parts := memSplit(name)
	if len(parts) == 0 {
		return nil, "", memErr(op, name, fs.ErrInvalid)
	}
	d, err := m.lookup(op, strings.Join(parts[:len(parts)-1], "/"))
	if err != nil {
		return nil, "", err
	}
	if !d.dir {
		return nil, "", memErr(op, name, errMemNotDir)
	}
	return d, parts[len(parts)-1], nil
}

// Create implements FS. There is no umask: the file has perm.
func (m *MemFS) Create(name string, perm fs.FileMode) (File, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	d, base, err := m.parent("create", name)
	if err != nil {
		return nil, err
	}
	if _, ok := d.children[base]; ok {
		return nil, memErr("create", name, fs.ErrExist)
	}
	now := time.Now()
	n := &memNode{perm: perm.Perm(), mtime: now}
	d.children[base] = n
	d.mtime = now
	return &memFile{fs: m, n: n, name: name, write: true}, nil
}

// Open implements FS.
func (m *MemFS) Open(name string) (File, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	n, err := m.lookup("open", name)
	if err != nil {
		return nil, err
	}
	if n.dir {
		return nil, memErr("open", name, fmt.Errorf("%w: it is a directory", ErrNotRegular))
	}
	return &memFile{fs: m, n: n, name: name}, nil
}

// Mkdir implements FS. There is no umask: the directory has perm.
func (m *MemFS) Mkdir(name string, perm fs.FileMode) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	d, base, err := m.parent("mkdir", name)
	if err != nil {
		return err
	}
	if _, ok := d.children[base]; ok {
		return memErr("mkdir", name, fs.ErrExist)
	}
	d.children[base] = newMemDir(perm)
	d.mtime = time.Now()
	return nil
}

// MkdirAll implements FS. There is no umask: each directory created has
// perm.
func (m *MemFS) MkdirAll(name string, perm fs.FileMode) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := m.root
	for _, part := range memSplit(name) {
		c, ok := n.children[part]
		if !ok {
			c = newMemDir(perm)
			n.children[part] = c
			n.mtime = c.mtime
		} else if !c.dir {
			return memErr("mkdir", name, errMemNotDir)
		}
		n = c
	}
	return nil
}

// Rename implements FS.
func (m *MemFS) Rename(oldname, newname string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	od, obase, err := m.parent("rename", oldname)
	if err != nil {
		return err
	}
	n, ok := od.children[obase]
	if !ok {
		return memErr("rename", oldname, fs.ErrNotExist)
	}
	nd, nbase, err := m.parent("rename", newname)
	if err != nil {
		return err
	}
	if n.dir && m.under(nd, n) {
		return memErr("rename", newname, fs.ErrInvalid)
	}
	if old, ok := nd.children[nbase]; ok && old != n {
		switch {
		case n.dir && !old.dir:
			return memErr("rename", newname, errMemNotDir)
		case !n.dir && old.dir:
			return memErr("rename", newname, errMemIsDir)
		case old.dir && len(old.children) > 0:
			return memErr("rename", newname, errMemNotEmpty)
		}
	}
	delete(od.children, obase)
	nd.children[nbase] = n
	now := time.Now()
	od.mtime, nd.mtime = now, now
	return nil
}

// under reports whether d is dir or lies below it. m.mu is held.
func (m *MemFS) under(d, dir *memNode) bool {
	if d == dir {
		return true
	}
	for _, c := range dir.children {
		if c.dir && m.under(d, c) {
			return true
		}
	}
	return false
}

// Remove implements FS.
func (m *MemFS) Remove(name string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	d, base, err := m.parent("remove", name)
	if err != nil {
		return err
	}
	n, ok := d.children[base]
	if !ok {
		return memErr("remove", name, fs.ErrNotExist)
	}
	if n.dir && len(n.children) > 0 {
		return memErr("remove", name, errMemNotEmpty)
	}
	delete(d.children, base)
	d.mtime = time.Now()
	return nil
}

// RemoveAll implements FS. The removal of each directory's entries is
// durable only once that directory is synced.
func (m *MemFS) RemoveAll(name string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	d, base, err := m.parent("removeall", name)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	n, ok := d.children[base]
	if !ok {
		return nil
	}
	var clear func(n *memNode)
	clear = func(n *memNode) {
		for name, c := range n.children {
			if c.dir {
				clear(c)
			}
			delete(n.children, name)
		}
	}
	if n.dir {
		clear(n)
	}
	delete(d.children, base)
	d.mtime = time.Now()
	return nil
}

// ReadDir implements FS.
func (m *MemFS) ReadDir(name string) ([]fs.DirEntry, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	n, err := m.lookup("readdir", name)
	if err != nil {
		return nil, err
	}
	if !n.dir {
		return nil, memErr("readdir", name, errMemNotDir)
	}
	names := slices.Sorted(maps.Keys(n.children))
	out := make([]fs.DirEntry, len(names))
	for i, nm := range names {
		out[i] = fs.FileInfoToDirEntry(n.children[nm].info(nm))
	}
	return out, nil
}

// Stat implements FS.
func (m *MemFS) Stat(name string) (fs.FileInfo, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	n, err := m.lookup("stat", name)
	if err != nil {
		return nil, err
	}
	return n.info(filepath.Base(name)), nil
}

// SyncDir implements FS.
func (m *MemFS) SyncDir(name string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	n, err := m.lookup("syncdir", name)
	if err != nil {
		return err
	}
	if !n.dir {
		return memErr("syncdir", name, errMemNotDir)
	}
	n.durable = maps.Clone(n.children)
	return nil
}

// info describes n. m.mu is held.
func (n *memNode) info(name string) fs.FileInfo {
	fi := memInfo{name: name, size: int64(len(n.data)), mtime: n.mtime, mode: n.perm}
	if n.dir {
		fi.mode = fs.ModeDir | n.perm
		fi.size = 0
	}
	return fi
}

type memInfo struct {
	name  string
	size  int64
	mode  fs.FileMode
	mtime time.Time
}

func (i memInfo) Name() string       { return i.name }
func (i memInfo) Size() int64        { return i.size }
func (i memInfo) Mode() fs.FileMode  { return i.mode }
func (i memInfo) ModTime() time.Time { return i.mtime }
func (i memInfo) IsDir() bool        { return i.mode.IsDir() }
func (i memInfo) Sys() any           { return nil }

type memFile struct {
	fs     *MemFS
	n      *memNode
	name   string
	off    int
	write  bool
	closed bool
}

func (f *memFile) Read(p []byte) (int, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if f.closed {
		return 0, memErr("read", f.name, errMemClosed)
	}
	if f.n.dir {
		return 0, memErr("read", f.name, errMemIsDir)
	}
	if f.off >= len(f.n.data) {
		return 0, io.EOF
	}
	k := copy(p, f.n.data[f.off:])
	f.off += k
	return k, nil
}

func (f *memFile) Write(p []byte) (int, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if f.closed {
		return 0, memErr("write", f.name, errMemClosed)
	}
	if !f.write {
		return 0, memErr("write", f.name, errMemReadOnly)
	}
	f.n.data = append(f.n.data, p...)
	f.n.mtime = time.Now()
	return len(p), nil
}

func (f *memFile) Sync() error {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if f.closed {
		return memErr("sync", f.name, errMemClosed)
	}
	if f.n.dir {
		f.n.durable = maps.Clone(f.n.children)
		return nil
	}
	f.n.synced = slices.Clone(f.n.data)
	return nil
}

func (f *memFile) Close() error {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if f.closed {
		return memErr("close", f.name, errMemClosed)
	}
	f.closed = true
	return nil
}

func (f *memFile) Stat() (fs.FileInfo, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if f.closed {
		return nil, memErr("stat", f.name, errMemClosed)
	}
	return f.n.info(filepath.Base(f.name)), nil
}

// Lock implements FS. Locks live in the MemFS, not in its files: a crash
// clone starts with none, as processes holding locks die with a crash.
func (m *MemFS) Lock(dir string, mode LockMode) (func() error, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	n, err := m.lookup("lock", dir)
	if err != nil {
		return nil, err
	}
	if m.locks == nil {
		m.locks = map[*memNode]*memLock{}
	}
	l := m.locks[n]
	if l == nil {
		l = &memLock{}
		m.locks[n] = l
	}
	exclusive := mode == LockExclusive
	if l.exclusive || exclusive && l.shared > 0 {
		return nil, memErr("lock", dir, ErrLockHeld)
	}
	if exclusive {
		l.exclusive = true
	} else {
		l.shared++
	}
	var once sync.Once
	return func() error {
		once.Do(func() {
			m.mu.Lock()
			defer m.mu.Unlock()
			if exclusive {
				l.exclusive = false
			} else {
				l.shared--
			}
		})
		return nil
	}, nil
}

// Lstat implements FS. A MemFS has no symbolic links: it is Stat.
func (m *MemFS) Lstat(name string) (fs.FileInfo, error) { return m.Stat(name) }
