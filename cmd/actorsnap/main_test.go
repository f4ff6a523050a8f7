package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/actorsnap/actorsnap/internal/bankdemo"
	"github.com/actorsnap/actorsnap/internal/racereport"
	"github.com/actorsnap/actorsnap/internal/testenv"
	"github.com/actorsnap/actorsnap/persistence"
)

// bin is the actorsnap binary the tests run as a real process.
var bin string

var crashSeed = flag.Uint64("crash-seed", 0, "seed of TestCrashRecovery (0: from the clock)")

func TestMain(m *testing.M) {
	flag.Parse()
	dir, err := os.MkdirTemp("", "actorsnap-bin")
	if err != nil {
		panic(err)
	}
	bin = filepath.Join(dir, "actorsnap")
	args := []string{"build", "-o", bin}
	if raceBuild {
		// Every process the tests start, the members a command spawns
		// included (they inherit GORACE), writes its race reports to a
		// file of its own here; after the tests a race in this module's
		// code fails them.
		args = append(args, "-race")
		if err := os.Setenv("GORACE", "halt_on_error=0 log_path="+filepath.Join(dir, "race")); err != nil {
			panic(err)
		}
	}
	build := exec.Command("go", append(args, ".")...)
	build.Stderr = os.Stderr
	if err := build.Run(); err != nil {
		panic(err)
	}
	code := m.Run()
	if raceBuild && !racesOfTheBinary(dir) && code == 0 {
		code = 1
	}
	os.RemoveAll(dir)
	os.Exit(code)
}

// racesOfTheBinary reads the race reports the binary's processes wrote
// in dir (GORACE log_path: race.PID). It prints those in this module's
// code and reports false if there are any; those inside Proto.Actor and
// gRPC (a cluster member's) are listed, not failed.
func racesOfTheBinary(dir string) bool {
	files, _ := filepath.Glob(filepath.Join(dir, "race.*"))
	var theirs []string
	clean := true
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			fmt.Fprintf(os.Stderr, "reading %s: %v\n", f, err)
			return false
		}
		ours, other := racereport.Split(string(b))
		for _, r := range ours {
			fmt.Fprintf(os.Stderr, "a data race in this module's code, in a process of the binary (%s):%s\n", filepath.Base(f), r)
			clean = false
		}
		for _, o := range other {
			if !slices.Contains(theirs, o) {
				theirs = append(theirs, o)
			}
		}
	}
	if len(theirs) > 0 {
		fmt.Fprintf(os.Stderr, "data races inside dependencies in the binary's processes (logged, not failed): %s\n", strings.Join(theirs, "; "))
	}
	return clean
}

// actorsnap runs the binary to completion.
func actorsnap(t *testing.T, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err = cmd.Run()
	return out.String(), errb.String(), err
}

func TestCommands(t *testing.T) {
	store := filepath.Join(t.TempDir(), "snaps")
	out, _, err := actorsnap(t, "run", "bank", "--store", store, "--actors", "100", "--interval", "20ms", "--duration", "600ms")
	require.NoError(t, err, out)
	assert.Contains(t, out, "0 inconsistent")

	out, _, err = actorsnap(t, "ls", "--store", store)
	require.NoError(t, err)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	require.GreaterOrEqual(t, len(lines), 5, out)
	assert.Contains(t, lines[0], "owner: ")
	assert.Contains(t, lines[2], "IN FLIGHT")

	out, _, err = actorsnap(t, "show", "latest", "--store", store)
	require.NoError(t, err)
	assert.Contains(t, out, "100 participants")
	assert.Contains(t, out, "acct-00042")

	out, _, err = actorsnap(t, "verify", "latest", "--store", store)
	require.NoError(t, err)
	assert.Contains(t, out, "ok: checksums match")

	out, _, err = actorsnap(t, "analyze", "latest", "--store", store)
	require.NoError(t, err)
	assert.Contains(t, out, "\ndeadlocks: no deadlock\n", "the bank's accounts send and never wait")

	ids := storedIDs(t, store)
	out, _, err = actorsnap(t, "diff", fmt.Sprint(ids[0]), fmt.Sprint(ids[len(ids)-1]), "--store", store)
	require.NoError(t, err)
	assert.Contains(t, out, "actors changed")

	out, _, err = actorsnap(t, "export", "latest", "--format", "json", "--store", store)
	require.NoError(t, err)
	var doc struct {
		ID           uint64 `json:"id"`
		Participants []struct {
			ID string `json:"id"`
		} `json:"participants"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &doc))
	assert.Len(t, doc.Participants, 100)

	out, _, err = actorsnap(t, "export", "latest", "--format", "dot", "--store", store)
	require.NoError(t, err)
	assert.True(t, strings.HasPrefix(out, "digraph snapshot_"))
	assert.Regexp(t, `"acct-\d+" -> "acct-\d+" \[label=`, out, "the channels in flight")

	out, _, err = actorsnap(t, "restore", "latest", "--store", store, "--interval", "20ms", "--duration", "300ms")
	require.NoError(t, err, out)
	assert.Contains(t, out, "restored 100 accounts, $100000")
	assert.Contains(t, out, "0 inconsistent")

	// Counting per channel, chosen on the command line, keeps no sums;
	// the default, in one process, does.
	out, _, err = actorsnap(t, "verify", "latest", "--store", store)
	require.NoError(t, err)
	assert.Contains(t, out, "the sums balance")
	perChannel := filepath.Join(t.TempDir(), "snaps")
	out, _, err = actorsnap(t, "run", "bank", "--store", perChannel, "--actors", "50", "--counting", "per-channel", "--interval", "20ms", "--duration", "300ms")
	require.NoError(t, err, out)
	assert.Contains(t, out, "0 inconsistent")
	out, _, err = actorsnap(t, "verify", "latest", "--store", perChannel)
	require.NoError(t, err)
	assert.Contains(t, out, "ok: checksums match")
	assert.NotContains(t, out, "the sums balance", "counted per channel")
}

// runSmallBank runs the bank demo briefly into store, which takes a few
// snapshots of 20 accounts.
func runSmallBank(t *testing.T, store string) {
	t.Helper()
	_, _, err := actorsnap(t, "run", "bank", "--store", store, "--actors", "20", "--interval", "20ms", "--duration", "200ms")
	require.NoError(t, err)
}

// Bad input gives one line on stderr and a non-zero exit.
func TestCommandErrors(t *testing.T) {
	store := filepath.Join(t.TempDir(), "snaps")
	runSmallBank(t, store)
	ids := storedIDs(t, store)

	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"ls", "--store", filepath.Join(store, "missing")}, "no store at"},
		{[]string{"show", "9999", "--store", store}, "snapshot not found"},
		{[]string{"show", "abc", "--store", store}, "bad snapshot id"},
		{[]string{"export", "latest", "--format", "xml", "--store", store}, "unknown --format"},
		{[]string{"run", "bank", "--mode", "fast", "--store", store}, "unknown mode \"fast\""},
		{[]string{"run", "bank", "--counting", "each", "--store", store}, "unknown counting \"each\""},
		{[]string{"run", "bank", "--mode", "aligned", "--counting", "sums", "--store", store}, "counting in sums needs the epoch mode"},
		{[]string{"run", "bank", "--members", "2", "--counting", "sums", "--store", store}, "--counting sums runs in one process"},
		{[]string{"restore", "9999", "--store", store, "--duration", "100ms"}, "snapshot not found"},
	} {
		_, stderr, err := actorsnap(t, tc.args...)
		var exit *exec.ExitError
		require.True(t, errors.As(err, &exit), "%v: %v", tc.args, err)
		assert.NotZero(t, exit.ExitCode())
		assert.Contains(t, stderr, tc.want, tc.args)
		assert.Equal(t, 1, strings.Count(strings.TrimSpace(stderr), "\n")+1, "one line: %q", stderr)
	}

	// A corrupt snapshot is reported, not loaded.
	corruptOne(t, store, ids[len(ids)-1])
	_, stderr, err := actorsnap(t, "verify", fmt.Sprint(ids[len(ids)-1]), "--store", store)
	require.Error(t, err)
	assert.Contains(t, stderr, "corrupt")
	assert.Equal(t, 1, strings.Count(strings.TrimSpace(stderr), "\n")+1, "one line: %q", stderr)
}

func storedIDs(t *testing.T, dir string) []uint64 {
	t.Helper()
	s, err := persistence.Open(context.Background(), dir)
	require.NoError(t, err)
	ids, err := s.List(context.Background())
	require.NoError(t, err)
	require.NotEmpty(t, ids)
	out := make([]uint64, len(ids))
	for i, id := range ids {
		out[i] = uint64(id)
	}
	return out
}

// corruptOne flips a byte in the middle of the largest file of snapshot id.
func corruptOne(t *testing.T, dir string, id uint64) {
	t.Helper()
	var biggest string
	var size int64
	require.NoError(t, filepath.Walk(dir, func(path string, info os.FileInfo, err error) error {
		if err == nil && !info.IsDir() && strings.Contains(path, fmt.Sprintf("%016d", id)) && info.Size() > size {
			biggest, size = path, info.Size()
		}
		return nil
	}))
	require.NotEmpty(t, biggest, "no file of snapshot %d under %s", id, dir)
	data, err := os.ReadFile(biggest)
	require.NoError(t, err)
	data[len(data)/2] ^= 0xff
	require.NoError(t, os.WriteFile(biggest, data, 0o644))
}

// TestCrashRecovery runs the bank demo as a real process saving snapshots
// to the file store, kills it with SIGKILL at random moments, and resumes
// from the latest snapshot with a fresh process each time. Every snapshot
// ever stored must load whole and hold all the money.
func TestCrashRecovery(t *testing.T) {
	seed := *crashSeed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	t.Logf("seed %d (replay: go test ./cmd/actorsnap -run TestCrashRecovery -crash-seed %d)", seed, seed)
	crashTrials(t, filepath.Join(t.TempDir(), "snaps"), seed, 10)
}

// TestCrashRecoveryAligned is TestCrashRecovery in the aligned mode: the
// restores replay the back edges' logs before new input.
func TestCrashRecoveryAligned(t *testing.T) {
	seed := *crashSeed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	t.Logf("seed %d (replay: go test ./cmd/actorsnap -run TestCrashRecoveryAligned -crash-seed %d)", seed, seed)
	store := filepath.Join(t.TempDir(), "snaps")
	crashTrials(t, store, seed, 4, "--mode", "aligned")
	out, _, err := actorsnap(t, "ls", "--store", store)
	require.NoError(t, err)
	assert.Contains(t, out, "aligned")
	assert.NotContains(t, out, "unaligned")
}

// TestCrashRecoveryPostgres is TestCrashRecovery on the PostgreSQL store.
func TestCrashRecoveryPostgres(t *testing.T) {
	testenv.Postgres(t)
	seed := *crashSeed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	t.Logf("seed %d (replay: go test ./cmd/actorsnap -run TestCrashRecoveryPostgres -crash-seed %d)", seed, seed)
	_, store := testenv.PostgresStore(t, fmt.Sprintf("crash_%d", seed%1_000_000_007))
	crashTrials(t, store, seed, 10)
}

func crashTrials(t *testing.T, store string, seed uint64, trials int, runArgs ...string) {
	r := rand.New(rand.NewPCG(seed, 9))
	const accounts, total = 300, 300 * 1000
	for trial := range trials {
		args := []string{"restore", "latest"}
		if trial == 0 {
			args = append([]string{"run", "bank", "--actors", fmt.Sprint(accounts)}, runArgs...)
		}
		args = append(args, "--store", store, "--interval", "25ms", "--duration", "1h", "--retain", "5")
		cmd := exec.Command(bin, args...)
		stdout, err := cmd.StdoutPipe()
		require.NoError(t, err)
		var stderr testenv.SyncBuffer
		cmd.Stderr = &stderr
		require.NoError(t, cmd.Start())

		// Wait for a few snapshots, then kill at a random moment after.
		want := 1 + r.IntN(4)
		lines := make(chan string)
		go func() {
			sc := bufio.NewScanner(stdout)
			for sc.Scan() {
				lines <- sc.Text()
			}
			close(lines)
		}()
		deadline := time.After(time.Minute)
		for seen := 0; seen < want; {
			select {
			case l, ok := <-lines:
				require.True(t, ok, "trial %d: process ended early: %s", trial, stderr.String())
				require.NotContains(t, l, "NO:", "trial %d", trial)
				if strings.HasSuffix(strings.TrimSpace(l), "yes") {
					seen++
				}
			case <-deadline:
				t.Fatalf("trial %d: no snapshot within a minute: %s", trial, stderr.String())
			}
		}
		kill := time.AfterFunc(time.Duration(r.IntN(40))*time.Millisecond, func() { _ = cmd.Process.Signal(syscall.SIGKILL) })
		go func() { _, _ = io.Copy(io.Discard, stdout) }()
		for range lines {
		}
		err = cmd.Wait()
		kill.Stop()
		require.Error(t, err, "trial %d: killed", trial)

		// The store yields no torn snapshot, and every one holds all the money.
		s, err := persistence.OpenURL(context.Background(), store)
		require.NoError(t, err)
		defer closeStore(s)
		ids, err := s.List(context.Background())
		require.NoError(t, err)
		require.NotEmpty(t, ids)
		for _, id := range ids {
			g, err := s.Load(context.Background(), id)
			require.NoError(t, err, "trial %d: snapshot %d", trial, id)
			require.NoError(t, bankdemo.Check(g, total), "trial %d: snapshot %d", trial, id)
		}
		latest, err := s.Latest(context.Background())
		require.NoError(t, err)
		require.Equal(t, ids[len(ids)-1], latest.ID)
		t.Logf("trial %d: killed after %d snapshots; store holds %v", trial, want, ids)
	}
}

// On a real terminal (a pseudo-terminal made by script(1)), restore shows
// its progress; into a pipe it does not.
func TestRestoreShowsProgressOnATerminal(t *testing.T) {
	scriptCmd, err := exec.LookPath("script")
	require.NoError(t, err, "script(1), from util-linux, gives the test a terminal")
	store := filepath.Join(t.TempDir(), "snaps")
	_, _, err = actorsnap(t, "run", "bank", "--store", store, "--actors", "50", "--interval", "20ms", "--duration", "200ms")
	require.NoError(t, err)

	line := fmt.Sprintf("%s restore latest --store %s --interval 20ms --duration 200ms", bin, store)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, scriptCmd, "-qec", line, "/dev/null").CombinedOutput()
	require.NoError(t, err, string(out))
	assert.Contains(t, string(out), "restoring snapshot latest…") // the spinner's line
	assert.Contains(t, string(out), "restoring snapshot latest: done in")

	_, stderr, err := actorsnap(t, "restore", "latest", "--store", store, "--interval", "20ms", "--duration", "100ms")
	require.NoError(t, err)
	assert.NotContains(t, stderr, "restoring snapshot")
}
