package membership

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/cluster"
	"github.com/asynkron/protoactor-go/cluster/clusterproviders/etcd"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/actorsnap/actorsnap/internal/devca"
	"github.com/actorsnap/actorsnap/internal/testenv"
)

// Deadlines of the process tests. Joining takes Proto.Actor about a
// second, but a race-enabled member process on a busy 2-core machine can
// take several.
const (
	joinTimeout = 30 * time.Second
	seeTimeout  = 20 * time.Second
	// dropSlack is what a dead member may take beyond the TTL to be
	// dropped: etcd looks for expired leases every 500 ms, and the news
	// then crosses a watch, Proto.Actor's member list and a pipe.
	dropSlack   = 3 * time.Second
	exitTimeout = 20 * time.Second
)

// uniqueClusterName keeps test runs, and runs of -count, from seeing each
// other's members on one etcd.
func uniqueClusterName(prefix string) string {
	return fmt.Sprintf("%s-%d-%d", prefix, os.Getpid(), time.Now().UnixNano())
}

// The two scenarios run in parallel: their members mostly wait.

func TestEtcdMembership(t *testing.T) {
	ep := testenv.Etcd(t)
	t.Parallel()
	const ttl = 4 * time.Second // starved keep-alives on a loaded CI machine let 2 s leases lapse
	name := uniqueClusterName("membership-test")
	cfg := func() Config {
		return Config{ClusterName: name, Host: "127.0.0.1", Provider: Etcd, Etcd: []string{ep}, TTL: ttl}
	}
	runScenario(t, ttl, [4]Config{cfg(), cfg(), cfg(), cfg()}, func(t *testing.T, members int) {
		checkEtcdLeases(t, ep, name, members, ttl)
		checkReannounced(t, ep, name, members, ttl)
	})
}

func TestAutomanagedMembership(t *testing.T) {
	t.Parallel()
	const ttl = time.Second
	name := uniqueClusterName("membership-test")
	// Every port is chosen here, remote's too: a remote left to take a
	// free port of its own may take one chosen for another member's
	// provider between the choice and that member's start.
	ports := freePorts(t, 8)
	var seeds []string
	for _, p := range ports[:4] {
		seeds = append(seeds, fmt.Sprintf("127.0.0.1:%d", p))
	}
	var cfgs [4]Config
	for i := range cfgs {
		cfgs[i] = Config{ClusterName: name, Host: "127.0.0.1", Port: ports[4+i], Provider: Automanaged,
			Seeds: seeds, AutomanagedPort: ports[i], TTL: ttl}
	}
	runScenario(t, ttl, cfgs, nil)
}

// runScenario runs members in processes of their own: three with cfgs[0:3]
// that must see each other; one of them killed with SIGKILL, that the
// other two must drop within ttl+dropSlack; a fourth with cfgs[3], that
// all must see; the fourth leaving, that the other two must drop; the last
// two leaving, each exiting cleanly. check, if not nil, looks at the
// cluster with the three first members up.
func runScenario(t *testing.T, ttl time.Duration, cfgs [4]Config, check func(t *testing.T, members int)) {
	top := t
	names := []string{"a", "b", "c", "d"}
	var kids []*child
	for i := range 3 {
		kids = append(kids, startChild(t, names[i], childSpec{Config: cfgs[i]}))
	}
	for _, k := range kids {
		k.waitJoined(joinTimeout)
	}
	want := selves(kids)

	t.Run("three see each other", func(t *testing.T) {
		setT(t, kids...)
		for _, k := range kids {
			k.waitMembers(want, seeTimeout)
			t.Logf("%s: %s joined in %s ms; its list: %v", k.name, k.self, k.joinMS, k.members)
		}
		if check != nil {
			check(t, 3)
		}
	})
	if t.Failed() {
		return
	}

	a, b, c := kids[0], kids[1], kids[2]
	t.Run("a killed member is dropped", func(t *testing.T) {
		setT(t, a, b, c)
		killed := b.kill()
		want = selves([]*child{a, c})
		for _, k := range []*child{a, c} {
			seen := k.waitMembers(want, ttl+dropSlack)
			t.Logf("%s dropped the killed member %s %v after SIGKILL (TTL %v)",
				k.name, b.self, seen.Sub(killed).Round(time.Millisecond), ttl)
		}
	})
	if t.Failed() {
		return
	}

	var d *child
	t.Run("a later member is seen", func(t *testing.T) {
		started := time.Now()
		d = startChild(top, names[3], childSpec{Config: cfgs[3]})
		setT(t, a, c, d)
		d.waitJoined(joinTimeout)
		want = selves([]*child{a, c, d})
		for _, k := range []*child{a, c, d} {
			seen := k.waitMembers(want, seeTimeout)
			t.Logf("%s sees %s %v after it was started (its Join took %s ms)",
				k.name, d.self, seen.Sub(started).Round(time.Millisecond), d.joinMS)
		}
	})
	if t.Failed() {
		return
	}

	t.Run("a member that leaves is dropped", func(t *testing.T) {
		setT(t, a, c, d)
		asked := time.Now()
		_ = d.stdin.Close()
		want = selves([]*child{a, c})
		for _, k := range []*child{a, c} {
			seen := k.waitMembers(want, seeTimeout)
			t.Logf("%s dropped %s %v after it was asked to leave",
				k.name, d.self, seen.Sub(asked).Round(time.Millisecond))
		}
		d.leave(exitTimeout)
		t.Logf("%s: Leave took %s ms", d.name, d.leaveMS)
	})
	if t.Failed() {
		return
	}

	t.Run("the last members leave", func(t *testing.T) {
		setT(t, a, c)
		start := time.Now()
		_ = a.stdin.Close()
		_ = c.stdin.Close()
		a.leave(exitTimeout)
		c.leave(exitTimeout)
		t.Logf("the last two left in %v (Leave took %s and %s ms)",
			time.Since(start).Round(time.Millisecond), a.leaveMS, c.leaveMS)
	})
}

func setT(t *testing.T, kids ...*child) {
	for _, k := range kids {
		k.t = t
	}
}

// TestJoinThatCannotSeeItself: a member whose automanaged port is taken
// never sees itself; Join fails when its ctx ends, and the process goes on
// to exit rather than hang in what Proto.Actor started.
func TestJoinThatCannotSeeItself(t *testing.T) {
	t.Parallel()
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	port := taken.Addr().(*net.TCPAddr).Port
	k := startChild(t, "lonely", childSpec{
		Config: Config{ClusterName: uniqueClusterName("membership-test"), Host: "127.0.0.1",
			Provider: Automanaged, AutomanagedPort: port, TTL: 500 * time.Millisecond},
		JoinTimeout: 3 * time.Second,
	})
	l := k.next(time.Now().Add(joinTimeout), "joinerror line")
	if !strings.HasPrefix(l.text, "joinerror ") || !strings.Contains(l.text, "did not see itself") {
		t.Fatalf("got %q, want a joinerror saying it did not see itself", l.text)
	}
	t.Log(l.text)
	select {
	case <-k.exited:
	case <-time.After(exitTimeout):
		t.Fatal("the member did not exit after its Join failed")
	}
	k.checkExit(3)
}

func selves(kids []*child) []string {
	var l []string
	for _, k := range kids {
		l = append(l, k.self)
	}
	slices.Sort(l)
	return l
}

// checkEtcdLeases reads the member keys of the cluster from etcd: there
// must be one per member, each under a lease granted with the TTL asked
// for, which proves that the TTL reached Proto.Actor's provider.
func checkEtcdLeases(t *testing.T, ep, name string, members int, ttl time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{ep}, Context: ctx})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	resp, err := cli.Get(ctx, EtcdBaseKey+"/"+name+"/", clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Kvs) != members {
		t.Fatalf("etcd holds %d member keys for %s, want %d", len(resp.Kvs), name, members)
	}
	for _, kv := range resp.Kvs {
		lease, err := cli.TimeToLive(ctx, clientv3.LeaseID(kv.Lease))
		if err != nil {
			t.Fatal(err)
		}
		if got := time.Duration(lease.GrantedTTL) * time.Second; got != ttl {
			t.Errorf("key %s: lease granted for %v, want %v", kv.Key, got, ttl)
		}
	}
	t.Logf("etcd holds %d member keys, each under a lease granted for %v", len(resp.Kvs), ttl)
}

// checkReannounced watches the members' keys and requires each of the
// members to write its entry again, unchanged and under the same lease,
// within two TTLs: what heals a member list that missed a registration
// (lateEtcd.announce).
func checkReannounced(t *testing.T, ep, name string, members int, ttl time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*ttl+dropSlack)
	defer cancel()
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{ep}, Context: ctx})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	prefix := EtcdBaseKey + "/" + name + "/"
	resp, err := cli.Get(ctx, prefix, clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	type entry struct {
		value []byte
		lease int64
	}
	before := map[string]entry{}
	for _, kv := range resp.Kvs {
		before[string(kv.Key)] = entry{kv.Value, kv.Lease}
	}
	again := map[string]bool{}
	for w := range cli.Watch(ctx, prefix, clientv3.WithPrefix(), clientv3.WithRev(resp.Header.Revision+1)) {
		for _, ev := range w.Events {
			old, ok := before[string(ev.Kv.Key)]
			if ev.Type != clientv3.EventTypePut || !ok {
				continue
			}
			if !bytes.Equal(ev.Kv.Value, old.value) || ev.Kv.Lease != old.lease {
				t.Errorf("key %s written again changed: lease %d -> %d", ev.Kv.Key, old.lease, ev.Kv.Lease)
			}
			again[string(ev.Kv.Key)] = true
		}
		if len(again) == members {
			t.Logf("each of the %d members wrote its entry again, unchanged", members)
			return
		}
	}
	t.Fatalf("within %v, %d of %d members wrote their entries again", 2*ttl+dropSlack, len(again), members)
}

func TestConfigCheck(t *testing.T) {
	good := Config{ClusterName: "c", Host: "127.0.0.1", Provider: Etcd, Etcd: []string{"127.0.0.1:2379"}}
	if err := good.check(); err != nil {
		t.Fatal(err)
	}
	expectRefusals(t, good, []refusal{
		{"no name", func(c *Config) { c.ClusterName = "" }, "no ClusterName"},
		{"no host", func(c *Config) { c.Host = "" }, "no Host"},
		{"unspecified host", func(c *Config) { c.Host = "0.0.0.0" }, "no address the others can reach"},
		{"bad port", func(c *Config) { c.Port = 70000 }, "Port 70000"},
		{"negative ttl", func(c *Config) { c.TTL = -time.Second }, "negative TTL"},
		{"no provider", func(c *Config) { c.Provider = 0 }, "unknown provider Provider(0)"},
		{"no endpoints", func(c *Config) { c.Etcd = nil }, "without etcd endpoints"},
		{"no automanaged port", func(c *Config) { c.Provider = Automanaged }, "needs AutomanagedPort"},
	})
}

// refusal is a change to a good Config that check must refuse, with an
// error that says want.
type refusal struct {
	name   string
	change func(*Config)
	want   string
}

// expectRefusals applies each change to a copy of good, its TLS cloned,
// and checks that check refuses it saying what the case wants.
func expectRefusals(t *testing.T, good Config, cases []refusal) {
	t.Helper()
	for _, tc := range cases {
		c := good
		if good.TLS != nil {
			c.TLS = good.TLS.Clone()
		}
		tc.change(&c)
		err := c.check()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want an error with %q", tc.name, err, tc.want)
		}
	}
}

func TestTLSCheck(t *testing.T) {
	files, err := devca.Generate(t.TempDir(), "127.0.0.1", "member.example")
	if err != nil {
		t.Fatal(err)
	}
	loaded, err := LoadTLS(files.CA, files.Cert, files.Key)
	if err != nil {
		t.Fatal(err)
	}
	if loaded.ClientAuth != tls.RequireAndVerifyClientCert || loaded.MinVersion != tls.VersionTLS13 {
		t.Fatalf("LoadTLS: ClientAuth %v, MinVersion %#x", loaded.ClientAuth, loaded.MinVersion)
	}
	good := Config{ClusterName: "c", Host: "127.0.0.1", Provider: Etcd, Etcd: []string{"127.0.0.1:2379"}, TLS: loaded}
	if err := good.check(); err != nil {
		t.Fatal(err)
	}
	expectRefusals(t, good, []refusal{
		{"no certificate", func(c *Config) { c.TLS.Certificates = nil }, "without Certificates"},
		{"client certificates not required", func(c *Config) { c.TLS.ClientAuth = tls.VerifyClientCertIfGiven }, "not RequireAndVerifyClientCert"},
		{"system roots", func(c *Config) { c.TLS.ClientCAs = nil }, "without both RootCAs and ClientCAs"},
		{"no verification", func(c *Config) { c.TLS.InsecureSkipVerify = true }, "InsecureSkipVerify"},
		{"another host", func(c *Config) { c.Host = "10.0.0.5" }, "not for 10.0.0.5"},
		{"advertised elsewhere", func(c *Config) { c.Advertised = "proxy.example:9000" }, "not for proxy.example"},
	})
	c := good
	c.Host = "member.example"
	if err := c.check(); err != nil {
		t.Errorf("a DNS name of the certificate: %v", err)
	}
}

func TestLoadTLSRefusesACertificateOfAnotherAuthority(t *testing.T) {
	ours, err := devca.Generate(t.TempDir(), "127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	theirs, err := devca.Generate(t.TempDir(), "127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	_, err = LoadTLS(ours.CA, theirs.Cert, theirs.Key)
	if err == nil || !strings.Contains(err.Error(), "unknown authority") {
		t.Fatalf("got %v, want an error naming an unknown authority", err)
	}
	if _, err := LoadTLS(ours.Key, ours.Cert, ours.Key); err == nil || !strings.Contains(err.Error(), "no PEM certificate") {
		t.Fatalf("a key as the authority: got %v", err)
	}
}

func TestEtcdTTLReachesTheProvider(t *testing.T) {
	for _, tc := range []struct{ set, want time.Duration }{
		{2 * time.Second, 2 * time.Second},
		{1500 * time.Millisecond, 2 * time.Second},
		{10 * time.Second, 10 * time.Second},
	} {
		p := &etcd.Provider{}
		if err := setEtcdTTL(p, tc.set); err != nil {
			t.Fatal(err)
		}
		if got := etcdTTL(p); got != tc.want {
			t.Errorf("set %v: the provider has %v, want %v", tc.set, got, tc.want)
		}
	}
}

func TestUnreachableEtcdIsAnError(t *testing.T) {
	ep := fmt.Sprintf("127.0.0.1:%d", freePorts(t, 1)[0]) // nobody listens there
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	start := time.Now()
	// Join asks etcd before it touches the actor system: nil is not used.
	_, err := Join(ctx, nil, Config{ClusterName: "c", Host: "127.0.0.1", Provider: Etcd, Etcd: []string{ep}})
	if err == nil || !strings.Contains(err.Error(), "does not answer") {
		t.Fatalf("got %v, want an error saying etcd does not answer", err)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("Join took %v to give up; its ctx had 500ms", d)
	}
}

func member(host string, port int32) *cluster.Member {
	return &cluster.Member{Id: fmt.Sprint(host, port), Host: host, Port: port}
}

func TestWatchAndMembers(t *testing.T) {
	m := &Membership{changed: make(chan struct{}), watchers: map[*watcher]struct{}{}}
	m.update([]*cluster.Member{member("127.0.0.1", 9002), member("127.0.0.1", 9001)})
	ch, stop := m.Watch()
	if got := <-ch; !slices.Equal(got, []string{"127.0.0.1:9001", "127.0.0.1:9002"}) {
		t.Fatalf("first list %v", got)
	}
	// The same members again: no new list.
	m.update([]*cluster.Member{member("127.0.0.1", 9001), member("127.0.0.1", 9002)})
	// IPv6 hosts are spelt as in a PID's address.
	m.update([]*cluster.Member{member("::1", 9003)})
	if got := <-ch; !slices.Equal(got, []string{"[::1]:9003"}) {
		t.Fatalf("second list %v", got)
	}
	// A reader that lags loses the oldest lists, never the newest.
	for i := range watchBuffer + 5 {
		m.update([]*cluster.Member{member("127.0.0.1", int32(10000+i))})
	}
	var last []string
	for range watchBuffer {
		last = <-ch
	}
	if want := fmt.Sprintf("127.0.0.1:%d", 10000+watchBuffer+4); !slices.Equal(last, []string{want}) {
		t.Fatalf("last list %v, want [%s]", last, want)
	}
	if got := m.Members(); !slices.Equal(got, last) {
		t.Fatalf("Members() = %v, want %v", got, last)
	}
	stop()
	stop()
	if _, ok := <-ch; ok {
		t.Fatal("the channel is open after stop")
	}
	m.update([]*cluster.Member{member("127.0.0.1", 1)}) // no watcher left: must not block
}
