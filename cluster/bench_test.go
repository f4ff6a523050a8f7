package cluster_test

import (
	"bufio"
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"os"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/remote"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/actorsnap/actorsnap/actors"
	"github.com/actorsnap/actorsnap/cluster"
	"github.com/actorsnap/actorsnap/cluster/placement"
	"github.com/actorsnap/actorsnap/internal/bankdemo"
	"github.com/actorsnap/actorsnap/persistence"
)

// BenchmarkClusterBank runs the bank on three member processes on
// loopback, each run measured for a fixed window once every member is
// ready: bare Proto.Actor remote (accounts as plain actors, transfers as
// protobuf); actorsnap with no snapshot; actorsnap with a snapshot every
// 100 ms. It reports the transfers the accounts received per second (all
// members), and, with snapshots, their latency p50 and p99. The ratios to
// bare are in docs/benchmarks.md.
func BenchmarkClusterBank(b *testing.B) {
	for _, c := range []struct {
		name     string
		mode     string
		accounts int
		interval time.Duration
	}{
		{"bare/accounts=3000", "bare", 3000, 0},
		{"actorsnap/accounts=3000", "actorsnap", 3000, 0},
		{"actorsnap-every-100ms/accounts=3000", "actorsnap", 3000, 100 * time.Millisecond},
		{"actorsnap-every-100ms/accounts=30000", "actorsnap", 30000, 100 * time.Millisecond},
	} {
		b.Run(c.name, func(b *testing.B) { benchBank(b, c.mode, c.accounts, c.interval) })
	}
}

func benchBank(b *testing.B, mode string, accounts int, interval time.Duration) {
	measure := 3 * time.Second
	var rates []float64
	var p50s, p99s []float64
	for range b.N {
		rate, p50, p99 := benchRun(b, mode, accounts, interval, measure)
		rates = append(rates, rate)
		if p50 > 0 {
			p50s, p99s = append(p50s, p50), append(p99s, p99)
		}
	}
	b.ReportMetric(median(rates), "transfers/s")
	if len(p50s) > 0 {
		b.ReportMetric(median(p50s), "p50-ms")
		b.ReportMetric(median(p99s), "p99-ms")
	}
	b.ReportMetric(0, "ns/op") // a run is a fixed window, not an op
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}

// benchRun starts three members, lets them run for measure once all are
// ready, and returns the transfers per second of all of them and the
// snapshot latency p50 and p99 in ms (zero without snapshots).
func benchRun(b *testing.B, mode string, accounts int, interval, measure time.Duration) (rate, p50, p99 float64) {
	const n = 3
	ports := freePorts(b, 2*n)
	spec := childSpec{Cluster: fmt.Sprintf("bench-%d", time.Now().UnixNano()), Store: b.TempDir(), Accounts: accounts,
		InFlight: 4, Members: n, Interval: interval, Timeout: 10 * time.Second, Bench: mode, Measure: measure}
	for i := range n {
		spec.Seeds = append(spec.Seeds, net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[n+i])))
		spec.Addrs = append(spec.Addrs, net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[i])))
	}
	var kids []*child
	for i := range n {
		s := spec
		s.Port, s.AutoPort = ports[i], ports[n+i]
		kids = append(kids, startChild(b, fmt.Sprintf("m%d", i), s))
	}
	deadline := time.Now().Add(3 * time.Minute)
	for _, k := range kids {
		k.expect(b, deadline, "ready")
	}
	for _, k := range kids {
		fmt.Fprintln(k.stdin, "go")
	}
	defer func() {
		for _, k := range kids {
			_ = k.cmd.Process.Kill()
		}
	}()
	for _, k := range kids {
		l := k.expect(b, deadline, "rate")
		f := strings.Fields(l)
		r, _ := strconv.ParseFloat(f[1], 64)
		rate += r
		if len(f) >= 5 && f[2] == "latency" {
			x, _ := strconv.ParseFloat(f[3], 64)
			y, _ := strconv.ParseFloat(f[4], 64)
			if x > 0 {
				p50, p99 = x, y
			}
		}
	}
	return rate, p50, p99
}

// runBench is a benchmark's member: it starts its part of the bank,
// says "ready", waits for "go" on stdin, kicks its accounts, counts the
// transfers they receive for spec.Measure, and says "rate R" (transfers
// a second here), with "latency P50 P99" in ms on the coordinator when
// snapshots ran.
func runBench(spec childSpec) int {
	out := &lineWriter{w: os.Stdout}
	in := bufio.NewScanner(os.Stdin)
	var kick func()
	var latencies func() (float64, float64)
	switch spec.Bench {
	case "bare":
		kick = bareBank(spec)
	default:
		var err error
		kick, latencies, err = snapBank(spec)
		if err != nil {
			out.printf("error %v", err)
			return 1
		}
	}
	out.printf("ready")
	if !in.Scan() {
		return 1
	}
	dir := os.Getenv("ACTORSNAP_BENCH_PROFILE")
	if dir != "" {
		// A CPU profile of the measuring window, one file per member,
		// and a block profile: where the members wait.
		if f, err := os.Create(fmt.Sprintf("%s/%s.pprof", dir, profileName(spec))); err == nil {
			_ = pprof.StartCPUProfile(f)
			defer pprof.StopCPUProfile()
		}
		runtime.SetBlockProfileRate(int(time.Microsecond))
	}
	start := bankdemo.Transfers() + bareTransfers.Load()
	kick()
	began := time.Now()
	<-time.After(spec.Measure) // the measuring window
	got := bankdemo.Transfers() + bareTransfers.Load() - start
	rate := float64(got) / time.Since(began).Seconds()
	pprof.StopCPUProfile() // before the line after which the parent kills it
	if dir != "" {
		if f, err := os.Create(fmt.Sprintf("%s/%s.block", dir, profileName(spec))); err == nil {
			_ = pprof.Lookup("block").WriteTo(f, 0)
			f.Close()
		}
	}
	if latencies != nil {
		p50, p99 := latencies()
		out.printf("rate %.0f latency %.1f %.1f", rate, p50, p99)
	} else {
		out.printf("rate %.0f", rate)
	}
	in.Scan() // killed by the parent
	return 0
}

// profileName names a member's profiles by its run's row and its port.
func profileName(spec childSpec) string {
	return fmt.Sprintf("%s-accounts=%d-every=%v-%d", spec.Bench, spec.Accounts, spec.Interval, spec.Port)
}

// snapBank starts this member's accounts on actorsnap.
func snapBank(spec childSpec) (kick func(), latencies func() (float64, float64), err error) {
	ctx := context.Background()
	store, err := persistence.Open(ctx, spec.Store)
	if err != nil {
		return nil, nil, err
	}
	m, err := cluster.Start(cluster.Config{Membership: memberConfig(spec), Members: spec.Members},
		bankdemo.Kind(initial), bankdemo.Messages, actors.WithStore(store), actors.WithSystemName(systemName),
		actors.WithTimeout(spec.Timeout), actors.WithRetain(4),
		actors.WithLogger(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))))
	if err != nil {
		return nil, nil, err
	}
	sys := m.System()
	var durations []float64
	var mu = make(chan struct{}, 1)
	mu <- struct{}{}
	sys.ActorSystem().EventStream.Subscribe(func(evt any) {
		if e, ok := evt.(*actors.SnapshotCompleted); ok {
			<-mu
			durations = append(durations, float64(e.Duration.Microseconds())/1000)
			mu <- struct{}{}
		}
	})
	bank, err := bankdemo.Start(sys, bankdemo.Config{Accounts: spec.Accounts, Initial: initial, Chords: 2, Seed: 7}, m.Owns)
	if err != nil {
		return nil, nil, err
	}
	if !waitFor(time.Now().Add(60*time.Second), func() bool {
		for i := range spec.Accounts {
			if !sys.Reachable(bankdemo.Name(i)) {
				return false
			}
		}
		return true
	}) {
		return nil, nil, fmt.Errorf("accounts not all reachable")
	}
	kick = func() {
		for _, pid := range bank.PIDs {
			sys.Root().Send(pid, &bankdemo.Kick{N: spec.InFlight})
		}
		if spec.Interval > 0 {
			_ = sys.SnapshotEvery(spec.Interval)
		}
	}
	latencies = func() (float64, float64) {
		<-mu
		defer func() { mu <- struct{}{} }()
		if len(durations) == 0 {
			return 0, 0
		}
		s := slices.Clone(durations)
		slices.Sort(s)
		return s[len(s)/2], s[len(s)*99/100]
	}
	return kick, latencies, nil
}

// bareTransfers counts the transfers bare accounts receive.
var bareTransfers atomic.Int64

// bareAccount is the bank's account as a plain Proto.Actor actor: the
// same work, with transfers as protobuf messages that remote carries.
type bareAccount struct {
	balance int64
	peers   []*actor.PID
	rng     *rand.Rand
}

func (a *bareAccount) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *bankdemo.Kick:
		for range m.N {
			a.pay(ctx)
		}
	case *wrapperspb.Int64Value:
		bareTransfers.Add(1)
		a.balance += m.Value
		a.pay(ctx)
	}
}

func (a *bareAccount) pay(ctx actor.Context) {
	amount := int64(0)
	if a.balance > 0 {
		amount = a.rng.Int64N(a.balance/2 + 1)
	}
	a.balance -= amount
	ctx.Send(a.peers[a.rng.IntN(len(a.peers))], wrapperspb.Int64(amount))
}

// bareBank starts this member's accounts as plain actors on Proto.Actor
// remote, placed by the same rendezvous hashing over spec.Addrs.
func bareBank(spec childSpec) (kick func()) {
	quiet := slog.New(slog.DiscardHandler)
	sys := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return quiet }))
	remote.NewRemote(sys, remote.Configure("127.0.0.1", spec.Port)).Start()
	self := sys.Address()
	cfg := bankdemo.Config{Accounts: spec.Accounts, Chords: 2, Seed: 7}
	r := rand.New(rand.NewPCG(cfg.Seed, 1))
	var mine []*actor.PID
	for i := range cfg.Accounts {
		names := []string{bankdemo.Name((i + 1) % cfg.Accounts)}
		for range cfg.Chords {
			names = append(names, bankdemo.Name(r.IntN(cfg.Accounts)))
		}
		name := bankdemo.Name(i)
		if placement.Owner(name, spec.Addrs) != self {
			continue
		}
		a := &bareAccount{balance: initial, rng: rand.New(rand.NewPCG(uint64(i), 2))}
		for _, n := range names {
			a.peers = append(a.peers, actor.NewPID(placement.Owner(n, spec.Addrs), n))
		}
		pid, err := sys.Root.SpawnNamed(actor.PropsFromProducer(func() actor.Actor { return a }), name)
		if err == nil {
			mine = append(mine, pid)
		}
	}
	return func() {
		for _, pid := range mine {
			sys.Root.Send(pid, &bankdemo.Kick{N: spec.InFlight})
		}
	}
}
