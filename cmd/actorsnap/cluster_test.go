package main

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/actorsnap/actorsnap/internal/devca"
	"github.com/actorsnap/actorsnap/internal/testenv"
)

var (
	// "  member 2   pid 41236    127.0.0.1:40125        coordinator"
	memberLine = regexp.MustCompile(`^\s+member (\d+)\s+pid (\d+)\s+(\S+)\s*(coordinator)?$`)
	// "      12        3      300        600     3.2ms  yes"
	snapshotLine = regexp.MustCompile(`^\s*(\d+)\s+(\d+)\s+(\d+)\s+(\d+)\s+\S+\s+(yes|NO.*)$`)
)

// member is a member process as the run lists it.
type member struct {
	n, pid      int
	addr        string
	coordinator bool
}

func parseMember(l string) (member, bool) {
	m := memberLine.FindStringSubmatch(l)
	if m == nil {
		return member{}, false
	}
	n, _ := strconv.Atoi(m[1])
	pid, _ := strconv.Atoi(m[2])
	return member{n: n, pid: pid, addr: m[3], coordinator: m[4] != ""}, true
}

// checkSnapshots checks the snapshot lines of out: at least min, each
// on members members and consistent. It returns them.
func checkSnapshots(t *testing.T, out string, members, min int) []string {
	t.Helper()
	var lines []string
	for _, l := range strings.Split(out, "\n") {
		m := snapshotLine.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		lines = append(lines, l)
		assert.Equal(t, "yes", m[5], "consistent: %s", l)
		assert.Equal(t, strconv.Itoa(members), m[2], "members: %s", l)
	}
	assert.GreaterOrEqual(t, len(lines), min, "snapshot lines:\n%s", out)
	return lines
}

// memberLogs shows the end of each member's log if the test failed.
func memberLogs(t *testing.T) string {
	dir := t.TempDir()
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		logs, _ := filepath.Glob(filepath.Join(dir, "member-*.log"))
		for _, f := range logs {
			b, _ := os.ReadFile(f)
			t.Logf("%s:\n%s", filepath.Base(f), lastLines(string(b), 30))
		}
	})
	return dir
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// The bank over three member processes: it lists them, and every
// snapshot holds all of them and is consistent; restored from the store
// they wrote onto two members, it holds the same money, and its
// snapshots are consistent too.
func TestMembersRunThenRestore(t *testing.T) {
	store := filepath.Join(t.TempDir(), "snaps")
	logs := memberLogs(t)
	start := time.Now()
	out, stderr, err := actorsnap(t, "run", "bank", "--members", "3", "--actors", "300", "--interval", "100ms",
		"--duration", "3s", "--store", store, "--logs", logs)
	require.NoError(t, err, "%s\n%s", out, stderr)
	t.Logf("run --members 3 --duration 3s took %v:\n%s", time.Since(start).Round(time.Millisecond), lastLines(out, 8))
	var listed []member
	for _, l := range strings.Split(out, "\n") {
		if m, ok := parseMember(l); ok {
			listed = append(listed, m)
		}
	}
	require.Len(t, listed, 3, out)
	assert.Contains(t, out, "300 accounts, $300000 in all")
	checkSnapshots(t, out, 3, 3)
	assert.Contains(t, out, " 0 inconsistent")

	start = time.Now()
	out, stderr, err = actorsnap(t, "restore", "latest", "--members", "2", "--interval", "100ms",
		"--duration", "3s", "--store", store, "--logs", logs)
	require.NoError(t, err, "%s\n%s", out, stderr)
	t.Logf("restore latest --members 2 --duration 3s took %v:\n%s", time.Since(start).Round(time.Millisecond), lastLines(out, 8))
	assert.Regexp(t, `restored from snapshot \d+ onto 2 members, \$300000`, out)
	checkSnapshots(t, out, 2, 3)
	assert.Contains(t, out, " 0 inconsistent")
}

// membersRun is a run on members read line by line as it goes.
type membersRun struct {
	cmd     *exec.Cmd
	lines   chan string
	out     *testenv.SyncBuffer // all of stdout, for the failure messages
	stderr  *testenv.SyncBuffer
	exited  chan struct{}
	err     error
	members []member // as listed, every generation
}

func startMembersRun(t *testing.T, args ...string) *membersRun {
	t.Helper()
	r := &membersRun{cmd: exec.Command(bin, args...), lines: make(chan string, 4096), out: &testenv.SyncBuffer{},
		stderr: &testenv.SyncBuffer{}, exited: make(chan struct{})}
	stdout, err := r.cmd.StdoutPipe()
	require.NoError(t, err)
	r.cmd.Stderr = r.stderr
	require.NoError(t, r.cmd.Start())
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			_, _ = r.out.Write([]byte(sc.Text() + "\n"))
			r.lines <- sc.Text()
		}
		r.err = r.cmd.Wait()
		close(r.exited)
	}()
	t.Cleanup(func() {
		_ = r.cmd.Process.Kill()
		for waiting := true; waiting; {
			select {
			case <-r.lines:
			case <-r.exited:
				waiting = false
			}
		}
		for _, m := range r.members {
			_ = syscall.Kill(m.pid, syscall.SIGKILL)
		}
	})
	return r
}

// next returns the next line that match accepts, failing the test on an
// inconsistent snapshot, at the deadline, or if the run ends.
func (r *membersRun) next(t *testing.T, deadline time.Time, what string, match func(string) bool) string {
	t.Helper()
	timer := time.NewTimer(time.Until(deadline))
	defer timer.Stop()
	for {
		select {
		case l := <-r.lines:
			if m, ok := parseMember(l); ok {
				r.members = append(r.members, m)
			}
			require.NotContains(t, l, "NO:", "an inconsistent snapshot:\n%s", r.out.String())
			if match(l) {
				return l
			}
		case <-r.exited:
			t.Fatalf("the run ended waiting for %s: %v\n%s\n%s", what, r.err, r.out.String(), r.stderr.String())
		case <-timer.C:
			t.Fatalf("no %s in time:\n%s\n%s", what, r.out.String(), r.stderr.String())
		}
	}
}

// snapshots waits for n consistent snapshots on members members.
func (r *membersRun) snapshots(t *testing.T, deadline time.Time, n, members int) {
	t.Helper()
	for range n {
		l := r.next(t, deadline, "a snapshot", func(l string) bool { return snapshotLine.MatchString(l) })
		assert.Equal(t, strconv.Itoa(members), snapshotLine.FindStringSubmatch(l)[2], l)
	}
}

// A member killed (kill -9) while the bank runs on three: the run shows
// the snapshot its death aborted, naming it (or, for the coordinator,
// the member that took over), then restores the bank from
// its latest complete snapshot onto three members, the two survivors in
// their own processes and a new one in the dead one's place, whose
// snapshots are consistent and hold the same money; interrupted, the run stops
// every member and exits cleanly.
func TestMemberKilledThenRestored(t *testing.T) {
	for _, coordinator := range []bool{false, true} {
		t.Run(map[bool]string{false: "member", true: "coordinator"}[coordinator], func(t *testing.T) {
			memberKilledThenRestored(t, coordinator)
		})
	}
}

func memberKilledThenRestored(t *testing.T, coordinator bool) {
	store := filepath.Join(t.TempDir(), "snaps")
	r := startMembersRun(t, "run", "bank", "--members", "3", "--actors", "300", "--interval", "100ms",
		"--duration", "5m", "--store", store, "--logs", memberLogs(t))
	deadline := time.Now().Add(90 * time.Second)
	for len(r.members) < 3 {
		r.next(t, deadline, "the members", func(l string) bool { _, ok := parseMember(l); return ok })
	}
	r.snapshots(t, deadline, 2, 3)

	var victim member
	for _, m := range r.members {
		if m.coordinator == coordinator {
			victim = m
		}
	}
	require.NotZero(t, victim.pid, "a member to kill (coordinator %v): %v", coordinator, r.members)
	start := time.Now()
	require.NoError(t, syscall.Kill(victim.pid, syscall.SIGKILL))
	r.next(t, deadline, "the death", func(l string) bool {
		return strings.HasPrefix(l, fmt.Sprintf("member %d (pid %d, %s) died: signal: killed", victim.n, victim.pid, victim.addr))
	})
	if coordinator {
		// Its snapshots in progress are lost with it: another member
		// takes over, without the dead one's participants.
		over := r.next(t, deadline, "the takeover or the restore", func(l string) bool {
			return strings.Contains(l, "coordinates now") || strings.HasPrefix(l, "restored from")
		})
		assert.Regexp(t, fmt.Sprintf(`^member \d+ \(\S+\) coordinates now; its cluster lost member %d's participants$`, victim.n), over)
	} else {
		aborted := r.next(t, deadline, "the abort or the restore", func(l string) bool {
			return strings.Contains(l, "aborted: cluster member left: "+victim.addr) || strings.HasPrefix(l, "restored from")
		})
		assert.Regexp(t, `^snapshot \d+ aborted: cluster member left: `+regexp.QuoteMeta(victim.addr)+`, with \d+ participants$`, aborted)
	}
	restored := r.next(t, deadline, "the restore", func(l string) bool { return strings.HasPrefix(l, "restored from") })
	assert.Regexp(t, `^restored from snapshot \d+ onto 3 members, \$300000, in .* \(2 in place\)$`, restored)
	t.Logf("killed member %d; %v later: %s", victim.n, time.Since(start).Round(time.Millisecond), restored)
	before := r.members
	r.snapshots(t, deadline, 3, 3)
	// The two survivors restored in their own processes; a new one took
	// the dead member's place.
	require.Len(t, r.members, len(before)+3, "the members listed again")
	after := r.members[len(before):]
	var kept, fresh int
	for _, m := range after {
		assert.NotEqual(t, victim.pid, m.pid, "the dead member is not listed")
		if slices.ContainsFunc(before, func(b member) bool { return b.pid == m.pid && b.n == m.n }) {
			kept++
		} else {
			fresh++
		}
	}
	assert.Equal(t, 2, kept, "survivors restored in place: %v", after)
	assert.Equal(t, 1, fresh, "a new member for the dead one: %v", after)

	require.NoError(t, r.cmd.Process.Signal(os.Interrupt))
	select {
	case <-r.exited:
	case <-time.After(time.Until(deadline)):
		t.Fatalf("the run did not stop:\n%s", r.out.String())
	}
	require.NoError(t, r.err, "%s\n%s", r.out.String(), r.stderr.String())
	assert.Contains(t, r.out.String(), " 0 inconsistent; 1 restore")
	for _, m := range r.members {
		assert.ErrorIs(t, syscall.Kill(m.pid, 0), syscall.ESRCH, "member %d (pid %d) is gone", m.n, m.pid)
	}
	t.Logf("output:\n%s", lastLines(r.out.String(), 12))
}

// Without --restart, a member's death ends the run with an error that
// names the member and the command that restores the bank.
func TestMemberKilledWithoutRestart(t *testing.T) {
	store := filepath.Join(t.TempDir(), "snaps")
	r := startMembersRun(t, "run", "bank", "--members", "3", "--actors", "100", "--interval", "100ms",
		"--duration", "5m", "--restart=false", "--store", store, "--logs", memberLogs(t))
	deadline := time.Now().Add(90 * time.Second)
	for len(r.members) < 3 {
		r.next(t, deadline, "the members", func(l string) bool { _, ok := parseMember(l); return ok })
	}
	r.snapshots(t, deadline, 1, 3)
	victim := r.members[2]
	require.NoError(t, syscall.Kill(victim.pid, syscall.SIGKILL))
	select {
	case <-r.exited:
	case <-time.After(time.Until(deadline)):
		t.Fatalf("the run did not stop:\n%s", r.out.String())
	}
	var exit *exec.ExitError
	require.True(t, errors.As(r.err, &exit), "a non-zero exit: %v", r.err)
	stderr := lastLines(r.stderr.String(), 1)
	assert.Regexp(t, fmt.Sprintf(`^actorsnap: member 3 \(pid %d, %s\) died: signal: killed; to restore the bank: actorsnap restore \d+ --members 3 --store %s$`,
		victim.pid, regexp.QuoteMeta(victim.addr), regexp.QuoteMeta(store)), stderr)
}

// The member command takes its TLS as three files, all or none, and
// refuses a certificate that is not of the authority it is given.
func TestMemberTLSFlags(t *testing.T) {
	ours, err := devca.Generate(t.TempDir(), "127.0.0.1")
	require.NoError(t, err)
	theirs, err := devca.Generate(t.TempDir(), "127.0.0.1")
	require.NoError(t, err)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--tls-ca", ours.CA}, "--tls-ca, --tls-cert and --tls-key go together"},
		{[]string{"--tls-ca", ours.CA, "--tls-cert", theirs.Cert, "--tls-key", theirs.Key}, "certificate signed by unknown authority"},
	} {
		out, stderr, err := actorsnap(t, append([]string{"member", "--cluster", "c"}, tc.args...)...)
		require.Error(t, err, "%v", tc.args)
		assert.Contains(t, out, `"event":"error"`, tc.args)
		assert.Contains(t, stderr, tc.want, tc.args)
	}
}

// A member takes "restore ID N NAME" from its supervisor and nothing
// else.
func TestRestoreLine(t *testing.T) {
	id, n, name, err := restoreLine("restore 12 3 actorsnap-7-2")
	require.NoError(t, err)
	assert.EqualValues(t, 12, id)
	assert.Equal(t, 3, n)
	assert.Equal(t, "actorsnap-7-2", name)
	for _, l := range []string{"", "restore", "restore 12", "restore 12 3", "restore 0 3 c", "restore 12 0 c", "restore x 3 c", "stop"} {
		_, _, _, err := restoreLine(l)
		assert.ErrorContains(t, err, `want "restore ID N NAME"`, "line %q", l)
	}
}
