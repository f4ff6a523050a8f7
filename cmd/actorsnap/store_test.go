package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vmihailenco/msgpack/v5"

	"github.com/actorsnap/actorsnap/internal/testenv"
	"github.com/actorsnap/actorsnap/persistence"
)

// fails runs the binary, which must exit non-zero with one line on
// stderr holding each of want; it returns stdout.
func fails(t *testing.T, want []string, args ...string) string {
	t.Helper()
	out, stderr, err := actorsnap(t, args...)
	var exit *exec.ExitError
	require.True(t, errors.As(err, &exit), "%v: want a non-zero exit, got %v; stdout %s", args, err, out)
	stderr = strings.TrimSpace(stderr)
	lines := strings.Split(stderr, "\n")
	last := lines[len(lines)-1]
	for _, w := range want {
		assert.Contains(t, last, w, "%v", args)
	}
	assert.True(t, strings.HasPrefix(last, "actorsnap: "), "the error is the last line of stderr: %q", stderr)
	return out
}

// running is a demo process in the background.
type running struct {
	cmd    *exec.Cmd
	lines  chan string
	stderr *testenv.SyncBuffer
}

// startDemo starts the binary with args and waits until it has taken n
// consistent snapshots.
func startDemo(t *testing.T, n int, args ...string) *running {
	t.Helper()
	cmd := exec.Command(bin, args...)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	r := &running{cmd: cmd, lines: make(chan string, 1024), stderr: &testenv.SyncBuffer{}}
	cmd.Stderr = r.stderr
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			r.lines <- sc.Text()
		}
		close(r.lines)
		_, _ = io.Copy(io.Discard, stdout)
	}()
	deadline := time.After(time.Minute)
	for seen := 0; seen < n; {
		select {
		case l, ok := <-r.lines:
			require.True(t, ok, "the demo ended early: %s", r.stderr.String())
			if strings.HasSuffix(strings.TrimSpace(l), "yes") {
				seen++
			}
		case <-deadline:
			t.Fatalf("no snapshot within a minute: %s", r.stderr.String())
		}
	}
	go func() {
		for range r.lines {
		}
	}()
	return r
}

// wait waits for the process to exit on its own and returns its error.
func (r *running) wait(t *testing.T) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- r.cmd.Wait() }()
	select {
	case err := <-done:
		return err
	case <-time.After(time.Minute):
		t.Fatalf("the demo did not exit within a minute: %s", r.stderr.String())
		return nil
	}
}

// A second system into a store that holds another's snapshots is
// refused, naming the owner; a namespace of its own is the way to share
// the store; and a restore continues the owner's ids.
func TestSecondSystemRefused(t *testing.T) {
	store := filepath.Join(t.TempDir(), "snaps")
	run := []string{"run", "bank", "--store", store, "--actors", "20", "--interval", "20ms", "--duration", "200ms"}
	_, _, err := actorsnap(t, run...)
	require.NoError(t, err)
	before := storedIDs(t, store)

	fails(t, []string{`system "bank"`, "restore", "namespace"}, run...)
	assert.Equal(t, before, storedIDs(t, store), "the refused run wrote nothing")

	_, _, err = actorsnap(t, append(run, "--namespace", "second")...)
	require.NoError(t, err, "a namespace is a store of its own")
	out, _, err := actorsnap(t, "ls", "--store", store)
	require.NoError(t, err)
	assert.Contains(t, out, `owner: system "bank"`)
	assert.Contains(t, out, "namespaces: second")
	out, _, err = actorsnap(t, "ls", "--store", store, "--namespace", "second")
	require.NoError(t, err)
	assert.Contains(t, out, `owner: system "bank"`)
	assert.Equal(t, before, storedIDs(t, store), "the namespace's snapshots are apart")

	out, _, err = actorsnap(t, "restore", fmt.Sprint(before[0]), "--store", store, "--interval", "20ms", "--duration", "100ms")
	require.NoError(t, err, out)
	assert.Contains(t, out, fmt.Sprintf("from snapshot %d ", before[0]), "names the snapshot restored")
	after := storedIDs(t, store)
	assert.Greater(t, after[len(after)-1], before[len(before)-1], "ids continue after the highest")
}

// While a system writes a store, a second run and a restore are refused;
// once the writer dies (kill -9), a restore takes the store over.
func TestWriterFenced(t *testing.T) {
	store := filepath.Join(t.TempDir(), "snaps")
	r := startDemo(t, 2, "run", "bank", "--store", store, "--actors", "20", "--interval", "20ms", "--duration", "1h")
	fails(t, []string{"in use", `system "bank"`}, "run", "bank", "--store", store, "--duration", "100ms")
	fails(t, []string{"in use", `system "bank"`}, "restore", "latest", "--store", store, "--duration", "100ms")
	out, _, err := actorsnap(t, "ls", "--store", store)
	require.NoError(t, err, "reading needs no lease")
	assert.Contains(t, out, "writer: running")

	require.NoError(t, r.cmd.Process.Signal(syscall.SIGKILL))
	_ = r.wait(t)
	out, _, err = actorsnap(t, "restore", "latest", "--store", store, "--interval", "20ms", "--duration", "100ms")
	require.NoError(t, err, "the kernel released the dead writer's lock: %s", out)
	assert.Contains(t, out, "0 inconsistent")
}

// A damaged newest snapshot blocks nothing: ls shows it, an older one
// restores and numbers after it, fsck sets it aside.
func TestDamagedSnapshotBlocksNothing(t *testing.T) {
	store := filepath.Join(t.TempDir(), "snaps")
	runSmallBank(t, store)
	ids := storedIDs(t, store)
	newest := ids[len(ids)-1]
	man := filepath.Join(store, fmt.Sprintf("snap-%020d", newest), "MANIFEST")
	require.NoError(t, os.WriteFile(man, []byte("damaged"), 0o644))

	out, _, err := actorsnap(t, "ls", "--store", store)
	require.NoError(t, err)
	assert.Regexp(t, fmt.Sprintf(`(?m)^%d +DAMAGED: .*MANIFEST`, newest), out)
	assert.Contains(t, out, fmt.Sprintf("highest id %d", newest))
	fails(t, []string{"1 damaged"}, "ls", "--strict", "--store", store)

	older := ids[len(ids)-2]
	out, _, err = actorsnap(t, "restore", fmt.Sprint(older), "--store", store, "--interval", "20ms", "--duration", "100ms")
	require.NoError(t, err, out)
	assert.Contains(t, out, fmt.Sprintf("from snapshot %d ", older))
	assert.Contains(t, out, fmt.Sprintf("first snapshot %d", newest+1), "numbered after the damaged id")

	out = fails(t, []string{"1 entries not ok"}, "fsck", "--store", store)
	assert.Contains(t, out, fmt.Sprintf("%d: DAMAGED", newest))
	out, _, err = actorsnap(t, "fsck", "--set-aside", "--store", store)
	require.NoError(t, err, out)
	assert.Contains(t, out, "1 set aside, 0 not ok, 0 not checked")
	_, _, err = actorsnap(t, "ls", "--strict", "--store", store)
	require.NoError(t, err)
}

// Special files in the store hang nothing: a FIFO in place of the newest
// snapshot's manifest, another in place of an older one's data, a FIFO
// and a file among the snapshots.
func TestSpecialFilesHangNothing(t *testing.T) {
	store := filepath.Join(t.TempDir(), "snaps")
	_, _, err := actorsnap(t, "run", "bank", "--store", store, "--actors", "20", "--interval", "20ms", "--duration", "300ms")
	require.NoError(t, err)
	ids := storedIDs(t, store)
	require.GreaterOrEqual(t, len(ids), 3)
	fifo := func(path string) {
		require.NoError(t, os.RemoveAll(path))
		require.NoError(t, syscall.Mkfifo(path, 0o644))
	}
	fifo(filepath.Join(store, fmt.Sprintf("snap-%020d", ids[len(ids)-1]), "MANIFEST"))
	fifo(filepath.Join(store, fmt.Sprintf("snap-%020d", ids[0]), "global.dat"))
	fifo(filepath.Join(store, "pipe"))
	require.NoError(t, os.WriteFile(filepath.Join(store, "notes.txt"), []byte("mine"), 0o644))

	out, _, err := actorsnap(t, "ls", "--store", store)
	require.NoError(t, err)
	assert.Contains(t, out, "not a regular file")
	assert.Regexp(t, `(?m)^pipe +DAMAGED: .*not a snapshot of this store`, out)
	assert.Regexp(t, `(?m)^notes.txt +DAMAGED: .*not a snapshot of this store`, out)
	fails(t, []string{"not a regular file"}, "verify", fmt.Sprint(ids[0]), "--store", store)
	out, _, err = actorsnap(t, "restore", "latest", "--store", store, "--interval", "20ms", "--duration", "100ms")
	require.NoError(t, err, out)
	assert.Contains(t, out, fmt.Sprintf("from snapshot %d ", ids[len(ids)-2]), "the newest complete snapshot")
}

// A run whose saves fail stops after --max-failures in a row and exits
// non-zero, with the errors on stderr: here the store's directory is
// replaced by a file while the run writes it.
func TestRunStopsWhenSavesFail(t *testing.T) {
	store := filepath.Join(t.TempDir(), "snaps")
	r := startDemo(t, 1, "run", "bank", "--store", store, "--actors", "20", "--interval", "20ms", "--duration", "1h", "--max-failures", "2")
	require.NoError(t, os.Rename(store, store+".gone"))
	require.NoError(t, os.WriteFile(store, []byte("not a directory"), 0o644))
	err := r.wait(t)
	var exit *exec.ExitError
	require.True(t, errors.As(err, &exit), "exits non-zero: %v", err)
	stderr := r.stderr.String()
	assert.Contains(t, stderr, "snapshot failed: ")
	assert.Contains(t, stderr, "2 snapshots in a row failed")
}

// A state that no longer decodes (a field's type changed between builds)
// fails verify and restore with one line naming the participant, its
// kind and type.
func TestStateNoLongerDecodes(t *testing.T) {
	ctx := context.Background()
	store := filepath.Join(t.TempDir(), "snaps")
	runSmallBank(t, store)
	s, err := persistence.Open(ctx, store)
	require.NoError(t, err)
	g, err := s.Latest(ctx)
	require.NoError(t, err)
	var state map[string]any
	require.NoError(t, msgpack.Unmarshal(g.Participants[3].State, &state))
	state["Balance"] = "a thousand"
	g.Participants[3].State, err = msgpack.Marshal(state)
	require.NoError(t, err)
	o, err := s.Ownership(ctx)
	require.NoError(t, err)
	g.ID = o.High + 1
	require.NoError(t, s.Save(ctx, g))

	want := []string{"does not decode", string(g.Participants[3].ID), `kind "account"`, "*bankdemo.Account"}
	fails(t, want, "verify", fmt.Sprint(g.ID), "--store", store)
	fails(t, want, "restore", fmt.Sprint(g.ID), "--store", store, "--duration", "100ms")
	_, stderr, _ := actorsnap(t, "restore", fmt.Sprint(g.ID), "--store", store, "--duration", "100ms")
	assert.NotContains(t, stderr, "restarted")
}

// The smaller items: inspection creates nothing, URLs and ids are
// checked, run needs a demo, and a store whose ids are exhausted is
// refused rather than wrapped around.
func TestStrictInput(t *testing.T) {
	dir := t.TempDir()
	store := filepath.Join(dir, "snaps")
	runSmallBank(t, store)

	fails(t, []string{"no store at"}, "ls", "--store", "FILE://"+filepath.Join(dir, "x"))
	fails(t, []string{"neither a path nor a URL"}, "ls", "--store", "://"+filepath.Join(dir, "y"))
	fails(t, []string{"no store at"}, "ls", "--store", store, "--namespace", "nope")
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Len(t, entries, 1, "inspection created nothing")
	_, err = os.Stat(filepath.Join(store, "namespaces"))
	require.ErrorIs(t, err, os.ErrNotExist)

	for _, id := range []string{"0", "-1", "18446744073709551616", "9223372036854775808"} {
		fails(t, []string{"bad snapshot id"}, "verify", "--store", store, "--", id)
	}
	fails(t, []string{"name a demo"}, "run", "--store", store)

	require.NoError(t, os.Mkdir(filepath.Join(store, fmt.Sprintf("snap-%020d", uint64(1<<63-1))), 0o755))
	fails(t, []string{"ids exhausted"}, "restore", "latest", "--store", store, "--duration", "100ms")
}

// A PostgreSQL server that accepts connections and never answers: every
// command gives up after the connect timeout, naming the host and the
// setting, instead of hanging.
func TestSilentPostgresServer(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	go func() {
		var conns []net.Conn
		defer func() {
			for _, c := range conns {
				c.Close()
			}
		}()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			conns = append(conns, c) // held open, never answered
		}
	}()
	// The default bounds the wait; the URL can set a shorter one.
	url := fmt.Sprintf("postgres://u@%s/db?sslmode=disable", ln.Addr())
	fails(t, []string{ln.Addr().String(), "did not answer within 10s", "connect_timeout"}, "ls", "--store", url)
	for _, args := range [][]string{{"verify", "latest"}, {"run", "bank", "--duration", "1s"}} {
		fails(t, []string{ln.Addr().String(), "did not answer within 1s", "connect_timeout"}, append(args, "--store", url+"&connect_timeout=1")...)
	}
}

// Two systems into one PostgreSQL schema: the second is refused, naming
// the owner, as with the file store.
func TestSecondSystemRefusedPostgres(t *testing.T) {
	_, store := testenv.PostgresStore(t, fmt.Sprintf("owner_%d", time.Now().UnixNano()))
	run := []string{"run", "bank", "--store", store, "--actors", "20", "--interval", "20ms", "--duration", "200ms"}
	_, _, err := actorsnap(t, run...)
	require.NoError(t, err)
	fails(t, []string{`system "bank"`, "restore"}, run...)
	out, _, err := actorsnap(t, "restore", "latest", "--store", store, "--interval", "20ms", "--duration", "100ms")
	require.NoError(t, err, out)
	assert.Contains(t, out, "0 inconsistent")
}

// fsck never sets aside a snapshot it could not read for a reason that is
// not the snapshot's (here a statement timeout while another session
// locks a table): it says so and exits non-zero, and everything stays.
func TestFsckSetsAsideOnlyDamage(t *testing.T) {
	ctx := context.Background()
	schema := fmt.Sprintf("fsck_%d", time.Now().UnixNano())
	url, store := testenv.PostgresStore(t, schema)
	runSmallBank(t, store)
	before, _, err := actorsnap(t, "ls", "--store", store)
	require.NoError(t, err)

	conn, err := pgx.Connect(ctx, url)
	require.NoError(t, err)
	defer conn.Close(ctx)
	tx, err := conn.Begin(ctx)
	require.NoError(t, err)
	_, err = tx.Exec(ctx, "LOCK TABLE "+pgx.Identifier{schema, "participants"}.Sanitize()+" IN ACCESS EXCLUSIVE MODE")
	require.NoError(t, err)
	out := fails(t, []string{"could not be checked"}, "fsck", "--set-aside", "--store", store+"&statement_timeout=300ms")
	assert.Contains(t, out, "NOT CHECKED")
	assert.NotContains(t, out, "set aside:")
	require.NoError(t, tx.Rollback(ctx))

	after, _, err := actorsnap(t, "ls", "--store", store)
	require.NoError(t, err)
	assert.Equal(t, before, after, "every snapshot is still there")
	_, _, err = actorsnap(t, "fsck", "--store", store)
	require.NoError(t, err)
}
