package main

import (
	"bufio"
	"bytes"
	"flag"
	"math/rand/v2"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

var crashSeed = flag.Uint64("seed", 0, "seed of TestCrashResume's kill moments (0: from the clock)")

// crashSize is the run TestCrashResume kills: a couple of seconds
// uninterrupted, so that ten kills land mid-run.
var crashSize = []string{"--side", "6", "--agents", "8000", "--ticks", "400", "--seed", "3", "--move", "0.02", "--infection", "0.3"}

var (
	finalRE  = regexp.MustCompile(`^final tick \d+: S=\d+ I=\d+ R=\d+ sha256 [0-9a-f]{64}$`)
	storedRE = regexp.MustCompile(`^snapshot \d+ stored: `)
)

// build builds the example into t's temporary directory.
func build(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "epidemic")
	out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput()
	require.NoError(t, err, string(out))
	return bin
}

// process is the example running as a process, its output read line by
// line.
type process struct {
	cmd    *exec.Cmd
	lines  chan string // closed at the end of its output
	stderr bytes.Buffer
}

func startProcess(t *testing.T, bin string, args ...string) *process {
	t.Helper()
	p := &process{cmd: exec.Command(bin, args...), lines: make(chan string, 64)}
	p.cmd.Stderr = &p.stderr
	stdout, err := p.cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, p.cmd.Start())
	go func() {
		defer close(p.lines)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			p.lines <- sc.Text()
		}
	}()
	return p
}

// next returns the process's next line, or ok false at the end of its
// output; it fails the test if none comes within the deadline.
func (p *process) next(t *testing.T, timer <-chan time.Time) (line string, ok bool) {
	t.Helper()
	select {
	case l, ok := <-p.lines:
		return l, ok
	case <-timer:
		_ = p.cmd.Process.Kill()
		t.Fatalf("%v: no output within %v", p.cmd.Args, deadline)
		return "", false
	}
}

// awaitStored reads the process's output until it says it stored a
// snapshot, and reports whether it did before its output ended.
func (p *process) awaitStored(t *testing.T) bool {
	t.Helper()
	timer := time.After(deadline)
	for {
		l, ok := p.next(t, timer)
		switch {
		case !ok:
			return false
		case strings.HasPrefix(l, "resuming"):
			t.Log(l)
		case storedRE.MatchString(l):
			return true
		}
	}
}

// drain reads the process's output to its end.
func (p *process) drain(t *testing.T) {
	t.Helper()
	timer := time.After(deadline)
	for ok := true; ok; _, ok = p.next(t, timer) {
	}
}

// finish reads the process's output to its end and returns its final line.
func (p *process) finish(t *testing.T) string {
	t.Helper()
	timer := time.After(deadline)
	last := ""
	for {
		l, ok := p.next(t, timer)
		if !ok {
			break
		}
		last = l
	}
	require.NoError(t, p.cmd.Wait(), p.stderr.String())
	require.Regexp(t, finalRE, last)
	return last
}

// TestCrashResume kills the example, a real process saving snapshots to a
// file store, with SIGKILL at ten seeded random moments, each some time
// after it said it stored a snapshot, and resumes it from the latest each
// time: it ends with the state of a run never interrupted, to the bit.
func TestCrashResume(t *testing.T) {
	seed := *crashSeed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	t.Logf("seed %d (replay: go test ./examples/epidemic -run TestCrashResume -seed %d)", seed, seed)
	bin := build(t)
	want := startProcess(t, bin, crashSize...).finish(t)
	for i, mode := range []string{"unaligned", "aligned", "epoch"} {
		t.Run(mode, func(t *testing.T) {
			r := rand.New(rand.NewPCG(seed, uint64(i)))
			store := filepath.Join(t.TempDir(), "snaps")
			args := append([]string{"--store", store, "--interval", "20ms", "--retain", "3", "--mode", mode}, crashSize...)
			for kill := range 10 {
				p := startProcess(t, bin, args...)
				args = []string{"--store", store, "--interval", "20ms", "--retain", "3", "--restore", "latest"}
				if !p.awaitStored(t) {
					require.NoError(t, p.cmd.Wait(), p.stderr.String())
					t.Logf("kill %d: the run finished before a snapshot", kill)
					continue
				}
				delay := time.Duration(r.IntN(100)) * time.Millisecond
				killer := time.AfterFunc(delay, func() { _ = p.cmd.Process.Kill() })
				p.drain(t)
				if err := p.cmd.Wait(); err == nil {
					t.Logf("kill %d, %v after a snapshot: the run had finished", kill, delay)
				}
				killer.Stop()
			}
			// The rest of the run, without snapshots: they would only slow it.
			got := startProcess(t, bin, "--store", store, "--restore", "latest").finish(t)
			require.Equal(t, want, got, "seed %d", seed)
		})
	}
}
