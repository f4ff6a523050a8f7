package cluster_test

import (
	"bufio"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/remote"
	"github.com/vmihailenco/msgpack/v5"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/actorsnap/actorsnap/actors"
	"github.com/actorsnap/actorsnap/cluster"
	"github.com/actorsnap/actorsnap/cluster/placement"
	"github.com/actorsnap/actorsnap/internal/bankdemo"
	"github.com/actorsnap/actorsnap/internal/devca"
	"github.com/actorsnap/actorsnap/internal/testenv"
	"github.com/actorsnap/actorsnap/persistence"
	"github.com/actorsnap/actorsnap/snapshot"
)

// BenchmarkClusterBank runs the bank on three member processes on
// loopback, each run measured once every member is ready for a base
// window of transfers alone and then for the window of the row: bare
// Proto.Actor remote (accounts as plain actors, transfers as protobuf);
// actorsnap with no snapshot; the same with the members' connections in
// mutual TLS (membership.Config.TLS); actorsnap with a snapshot every
// 100 ms; and
// the floors of a snapshot every 100 ms (floorKind) on the actorsnap
// plumbing with no snapshot. It reports the transfers the accounts
// received per second in the window (all members) and over the base
// window (of-base-window); with snapshots or floor rounds, their rate in
// the window and their latency p50 and p99 (start to durable); the cores
// the members used and their CPU per transfer; and each row's throughput
// over the no-snapshot row's of the same run (of-no-snapshot).
func BenchmarkClusterBank(b *testing.B) {
	var base float64 // the no-snapshot row's transfers/s
	for _, c := range []struct {
		name     string
		mode     string
		accounts int
		interval time.Duration
	}{
		{"bare/accounts=3000", "bare", 3000, 0},
		{"actorsnap/accounts=3000", "actorsnap", 3000, 0},
		{"actorsnap-tls/accounts=3000", "actorsnap-tls", 3000, 0},
		{"actorsnap-every-100ms/accounts=3000", "actorsnap", 3000, 100 * time.Millisecond},
		{"floor-touch/accounts=3000", "floor-touch", 3000, 100 * time.Millisecond},
		{"floor-capture-to-coordinator/accounts=3000", "floor-capture-to-coordinator", 3000, 100 * time.Millisecond},
		{"floor-capture-local-parts/accounts=3000", "floor-capture-local-parts", 3000, 100 * time.Millisecond},
		{"floor-capture-in-flight/accounts=3000", "floor-capture-in-flight", 3000, 100 * time.Millisecond},
		{"actorsnap-epoch-every-100ms/accounts=3000", "actorsnap-epoch", 3000, 100 * time.Millisecond},
		{"actorsnap-epoch-lazy-every-100ms/accounts=3000", "actorsnap-epoch-lazy", 3000, 100 * time.Millisecond},
		{"actorsnap-every-100ms/accounts=30000", "actorsnap", 30000, 100 * time.Millisecond},
		{"actorsnap-epoch-every-100ms/accounts=30000", "actorsnap-epoch", 30000, 100 * time.Millisecond},
	} {
		b.Run(c.name, func(b *testing.B) {
			rate := benchBank(b, c.mode, c.accounts, c.interval)
			switch {
			case c.mode == "actorsnap" && c.interval == 0 && c.accounts == 3000:
				base = rate
			case base > 0 && c.mode != "bare" && c.accounts == 3000:
				b.ReportMetric(rate/base, "of-no-snapshot")
			}
		})
	}
}

// bigBank is the accounts above which a row's window is 15 s and its
// snapshots' timeout 30 s: with 4 transfers in flight an account, a
// snapshot of 3 × 10,000 accounts records 120,000 of them, and with
// snapshots started every 100 ms, 4 at a time, each takes 8–10 s, more
// than a 3 s window and about the default timeout.
const bigBank = 10000

// benchBank measures b.N runs and reports their medians; it returns the
// median transfers/s.
func benchBank(b *testing.B, mode string, accounts int, interval time.Duration) float64 {
	measure := 3 * time.Second
	if accounts > bigBank {
		measure = 15 * time.Second
	}
	var rates, paired, cores, perTransfer, paces []float64
	var p50s, p99s, inFlight []float64
	for range b.N {
		r := benchRun(b, mode, accounts, interval, measure)
		rates, cores, paces = append(rates, r.rate), append(cores, r.cores), append(paces, r.pace)
		paired = append(paired, r.rate/r.base)
		perTransfer = append(perTransfer, r.cores/r.rate*1e6)
		if r.p50 > 0 {
			p50s, p99s = append(p50s, r.p50), append(p99s, r.p99)
			inFlight = append(inFlight, r.inFlight)
		}
	}
	b.ReportMetric(testenv.Median(rates), "transfers/s")
	// The window over the base window just before it, in the same
	// processes: the ratio that the machine's swings between runs and
	// other processes' load move least. Without snapshots it reads what
	// the two windows differ by anyway.
	b.ReportMetric(testenv.Median(paired), "of-base-window")
	b.ReportMetric(testenv.Median(cores), "cores")
	// The members' CPU per transfer: on a machine they saturate, as here,
	// throughput is the cores over it, so its ratio between rows reads
	// the same when other processes take some of the cores.
	b.ReportMetric(testenv.Median(perTransfer), "cpu-us/transfer")
	if interval > 0 {
		unit := "snapshots/s"
		if floorModes[mode] != noFloor {
			unit = "rounds/s"
		}
		b.ReportMetric(testenv.Median(paces), unit)
	}
	if len(p50s) > 0 {
		b.ReportMetric(testenv.Median(p50s), "p50-ms")
		b.ReportMetric(testenv.Median(p99s), "p99-ms")
		if floorModes[mode] == noFloor {
			b.ReportMetric(testenv.Median(inFlight), "in-flight/snapshot")
		}
	}
	b.ReportMetric(0, "ns/op") // a run is a fixed window, not an op
	return testenv.Median(rates)
}

// runResult is one run's measures, over all members.
type runResult struct {
	rate     float64 // transfers received per second
	base     float64 // the same in the base window
	cores    float64 // CPU seconds the members used per second
	pace     float64 // snapshots or floor rounds completed per second
	p50, p99 float64 // their latency in ms, start to durable
	inFlight float64 // median messages a snapshot recorded in flight
}

// benchRun starts three members, lets them run for a base window of
// measure once all are ready and then for the window of measure (with
// snapshots or floor rounds if interval is set), and returns what they
// measured.
func benchRun(b *testing.B, mode string, accounts int, interval, measure time.Duration) runResult {
	const n = 3
	ports := freePorts(b, 2*n)
	timeout := 10 * time.Second
	if accounts > bigBank {
		timeout = 30 * time.Second
	}
	spec := childSpec{Cluster: fmt.Sprintf("bench-%d", time.Now().UnixNano()), Store: b.TempDir(), Accounts: accounts,
		InFlight: 4, Members: n, Interval: interval, Timeout: timeout, Bench: mode, Measure: measure}
	switch mode { // the actorsnap rows in the epoch mode, or with TLS
	case "actorsnap-epoch":
		spec.Bench, spec.Epochs = "actorsnap", true
	case "actorsnap-epoch-lazy":
		spec.Bench, spec.Epochs, spec.Lazy = "actorsnap", true, true
	case "actorsnap-tls":
		files, err := devca.Generate(b.TempDir(), "127.0.0.1")
		if err != nil {
			b.Fatal(err)
		}
		spec.Bench, spec.TLS = "actorsnap", &files
	}
	for i := range n {
		spec.Seeds = append(spec.Seeds, net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[n+i])))
		spec.Addrs = append(spec.Addrs, net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[i])))
	}
	var kids []*child
	for i := range n {
		s := spec
		s.Port, s.AutoPort = ports[i], ports[n+i]
		if floorModes[mode] == floorLocalParts {
			s.Parts = b.TempDir()
		}
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
	var r runResult
	for _, k := range kids {
		// "rate R base B cpu S [latency P50 P99 pace X inflight F]"
		f := strings.Fields(k.expect(b, deadline, "rate"))
		num := func(i int) float64 {
			x, _ := strconv.ParseFloat(f[i], 64)
			return x
		}
		r.rate += num(1)
		for i := 2; i+1 < len(f); i++ {
			switch f[i] {
			case "base":
				r.base += num(i + 1)
			case "cpu":
				r.cores += num(i+1) / measure.Seconds()
			case "latency":
				if i+2 < len(f) && num(i+1) > 0 {
					r.p50, r.p99 = num(i+1), num(i+2)
				}
			case "pace":
				r.pace = max(r.pace, num(i+1))
			case "inflight":
				r.inFlight = max(r.inFlight, num(i+1))
			}
		}
	}
	return r
}

// runBench is a benchmark's member: it starts its part of the bank,
// says "ready", waits for "go" on stdin, kicks its accounts, lets them
// warm up, counts the transfers they receive for spec.Measure (the base
// window), starts the snapshots or floor rounds if spec.Interval is set,
// counts the transfers for spec.Measure again (the window), and says
// "rate R base B cpu S" (R and B transfers a second here in the window
// and the base window, S seconds of CPU this process used in the
// window), with "latency P50 P99 pace X inflight F" (ms; per second;
// the median of the messages a snapshot recorded in flight, 0 for floor
// rounds) on the coordinator when snapshots or floor rounds ran.
func runBench(spec childSpec) int {
	out := &lineWriter{w: os.Stdout}
	in := bufio.NewScanner(os.Stdin)
	var kick, schedule func()
	var done *completions
	var failed func() error
	switch spec.Bench {
	case "bare":
		kick, schedule = bareBank(spec), func() {}
	default:
		var err error
		kick, schedule, done, failed, err = snapBank(spec)
		if err != nil {
			out.printf("error %v", err)
			return 1
		}
	}
	out.printf("ready")
	if !in.Scan() {
		return 1
	}
	transfers := func() int64 { return bankdemo.Transfers() + bareTransfers.Load() }
	kick()
	// The first seconds of traffic run slower (the links' batches, the
	// heap and the worker pool grow): out of both windows.
	<-time.After(benchWarmUp)
	start, began := transfers(), time.Now()
	<-time.After(spec.Measure) // the base window
	base := float64(transfers()-start) / time.Since(began).Seconds()
	dir := os.Getenv("ACTORSNAP_BENCH_PROFILE")
	if dir != "" {
		// A CPU profile of the measuring window, one file per member,
		// a block profile (where the members wait) and the allocations
		// at its start and its end (go tool pprof -base NAME.allocs0
		// NAME.allocs: what the window allocated).
		if f, err := os.Create(fmt.Sprintf("%s/%s.pprof", dir, profileName(spec))); err == nil {
			_ = pprof.StartCPUProfile(f)
			defer pprof.StopCPUProfile()
		}
		runtime.SetBlockProfileRate(int(time.Microsecond))
		writeProfile(dir, spec, "allocs", "allocs0")
	}
	cpu0 := cpuTime()
	schedule()
	start, began = transfers(), time.Now()
	<-time.After(spec.Measure) // the window
	got := transfers() - start
	cpu := cpuTime() - cpu0
	ended := time.Now()
	window := ended.Sub(began).Seconds()
	rate := float64(got) / window
	pprof.StopCPUProfile() // before the line after which the parent kills it
	if dir != "" {
		writeProfile(dir, spec, "block", "block")
		writeProfile(dir, spec, "allocs", "allocs")
	}
	if failed != nil {
		if err := failed(); err != nil {
			out.printf("error %v", err)
			return 1
		}
	}
	if done != nil {
		p50, p99 := done.quantiles()
		pace := float64(done.between(began, ended)) / window
		out.printf("rate %.0f base %.0f cpu %.3f latency %.1f %.1f pace %.2f inflight %.0f", rate, base, cpu.Seconds(), p50, p99, pace, done.inFlightMedian())
	} else {
		out.printf("rate %.0f base %.0f cpu %.3f", rate, base, cpu.Seconds())
	}
	in.Scan() // killed by the parent
	return 0
}

// writeProfile writes the named runtime profile into dir, as the
// member's profileName with the extension ext.
func writeProfile(dir string, spec childSpec, name, ext string) {
	if f, err := os.Create(fmt.Sprintf("%s/%s.%s", dir, profileName(spec), ext)); err == nil {
		_ = pprof.Lookup(name).WriteTo(f, 0)
		f.Close()
	}
}

// benchWarmUp is the traffic a benchmark's member lets run before its
// base window.
const benchWarmUp = 2 * time.Second

// cpuTime returns the CPU time this process has used, user and system.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// profileName names a member's profiles by its run's row and its port.
func profileName(spec childSpec) string {
	return fmt.Sprintf("%s-accounts=%d-every=%v-%d", spec.Bench, spec.Accounts, spec.Interval, spec.Port)
}

// completions records snapshots or floor rounds as they complete, from
// any goroutine: when, and how long each took.
type completions struct {
	mu       sync.Mutex
	at       []time.Time
	ms       []float64
	inFlight []float64 // messages each snapshot recorded in flight
}

// add records a completion that took took and recorded inFlight
// messages in flight.
func (c *completions) add(took time.Duration, inFlight int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.at = append(c.at, time.Now())
	c.ms = append(c.ms, float64(took.Microseconds())/1000)
	c.inFlight = append(c.inFlight, float64(inFlight))
}

// inFlightMedian returns the median of the messages in flight the
// completions recorded, 0 if none.
func (c *completions) inFlightMedian() float64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return testenv.Median(c.inFlight)
}

// between returns how many completed from from to to.
func (c *completions) between(from, to time.Time) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, t := range c.at {
		if !t.Before(from) && !t.After(to) {
			n++
		}
	}
	return n
}

// quantiles returns the p50 and p99 latency in ms of all so far, zeros
// if none completed.
func (c *completions) quantiles() (p50, p99 float64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.ms) == 0 {
		return 0, 0
	}
	s := slices.Clone(c.ms)
	slices.Sort(s)
	return s[len(s)/2], s[len(s)*99/100]
}

// snapBank starts this member's accounts on actorsnap: bankdemo's, with
// snapshots every spec.Interval from schedule on if set; or, for a
// floor's row, accounts that take the floor's rounds every spec.Interval
// from schedule on, and no snapshot. failed, when set, returns what went
// wrong in the floor's rounds.
func snapBank(spec childSpec) (kick, schedule func(), done *completions, failed func() error, err error) {
	ctx := context.Background()
	store, err := persistence.Open(ctx, spec.Store)
	if err != nil {
		return nil, nil, nil, nil, err
	}
	opts := []actors.Option{bankdemo.Messages, actors.WithStore(store), actors.WithSystemName(systemName),
		actors.WithTimeout(spec.Timeout), actors.WithRetain(floorRetain),
		actors.WithLogger(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))}
	done = &completions{}
	var fm *floorMember
	if kind := floorModes[spec.Bench]; kind != noFloor {
		fm = &floorMember{kind: kind, store: store, dir: spec.Parts, timeout: spec.Timeout, total: spec.Accounts, inFlight: spec.InFlight, done: done}
		opts = append(opts, fm.options()...)
		failed = fm.failed
	} else {
		opts = append(opts, bankdemo.Kind(initial))
	}
	mcfg, err := memberConfig(spec)
	if err != nil {
		return nil, nil, nil, nil, err
	}
	m, err := cluster.Start(cluster.Config{Membership: mcfg, Members: spec.Members}, opts...)
	if err != nil {
		return nil, nil, nil, nil, err
	}
	sys := m.System()
	if fm == nil {
		sys.ActorSystem().EventStream.Subscribe(func(evt any) {
			if e, ok := evt.(*actors.SnapshotCompleted); ok {
				done.add(e.Duration, e.Global.TotalInFlight())
			}
		})
	}
	bank, err := bankdemo.Start(sys, bankdemo.Config{Accounts: spec.Accounts, Initial: initial, Chords: 2, Seed: 7}, m.Owns)
	if err != nil {
		return nil, nil, nil, nil, err
	}
	names := make([]string, 0, spec.Accounts)
	for i := range spec.Accounts {
		names = append(names, bankdemo.Name(i))
	}
	if fm != nil {
		if err := fm.start(m, bank.PIDs); err != nil {
			return nil, nil, nil, nil, err
		}
		names = append(names, fm.collectors...)
	}
	if !waitFor(time.Now().Add(60*time.Second), func() bool {
		for _, name := range names {
			if !sys.Reachable(name) {
				return false
			}
		}
		return true
	}) {
		return nil, nil, nil, nil, fmt.Errorf("accounts not all reachable")
	}
	kick = func() {
		for _, pid := range bank.PIDs {
			sys.Root().Send(pid, &bankdemo.Kick{N: spec.InFlight})
		}
	}
	schedule = func() {
		switch {
		case spec.Interval == 0:
		case fm != nil:
			fm.every(spec.Interval)
		default:
			_ = sys.SnapshotEvery(spec.Interval)
		}
	}
	return kick, schedule, done, failed, nil
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

// floorKind names what a floor row's rounds do: the least a snapshot
// every interval must do in one design or another, on the actorsnap
// plumbing with no snapshot and no algorithm (no markers, no channel
// counts or recordings, no assembly of records). The coordinator starts
// a round every interval, as SnapshotEvery does, over the cluster's link;
// a round is complete when every account of every member took part and
// its result is durable.
type floorKind uint8

const (
	noFloor floorKind = iota
	// floorTouch posts one message to every account per round, through
	// its mailbox, and nothing else; each member tells the coordinator
	// its count. What the mailboxes cost.
	floorTouch
	// floorToCoordinator is floorTouch with each account encoding its
	// state (msgpack) on its goroutine; each member ships its part to the
	// coordinator, and the coordinator saves a snapshot.Global of the
	// states per round in the file store, with retention: the floor of
	// any design that sends the states to the coordinator.
	floorToCoordinator
	// floorLocalParts captures as floorToCoordinator does, but each
	// member writes its part to a file of its own (fsync'd, renamed into
	// place, its directory fsync'd) and tells the coordinator only its
	// count: the floor of members writing their parts, without the second
	// commit that would join the parts into one snapshot.
	floorLocalParts
	// floorWithInFlight is floorToCoordinator with, besides each
	// account's state, as many transfers as it started encoded and
	// shipped with it and saved as a channel into it: the bank holds
	// childSpec.InFlight transfers in flight per account at all times, and
	// a consistent cut records every one of them as channel state. The
	// floor of any design that records the messages in flight and sends
	// them to the coordinator: the same number of messages of the same
	// size, without waiting for the ones actually in flight to arrive (on
	// the bank's random graph some accounts receive rarely).
	floorWithInFlight
)

// floorModes are the floor rows' childSpec.Bench values.
var floorModes = map[string]floorKind{
	"floor-touch":                  floorTouch,
	"floor-capture-to-coordinator": floorToCoordinator,
	"floor-capture-local-parts":    floorLocalParts,
	"floor-capture-in-flight":      floorWithInFlight,
}

// floorRetain is the snapshots (floor rounds, parts) kept, as in the
// actorsnap rows.
const floorRetain = 4

// floorStart starts a floor round on a member: from the coordinator's
// collector to another member's, over the cluster's link, as a snapshot's
// start goes.
type floorStart struct{ Round uint64 }

// floorPart is a member's part of a round, from its collector to the
// coordinator's over the cluster's link, the path records take: its
// accounts' names and states (floorToCoordinator), or only how many took
// part.
type floorPart struct {
	Round    uint64
	Count    int
	Names    []string
	States   [][]byte
	InFlight [][][]byte // by account, its transfers (floorWithInFlight)
}

// floorMessages registers the floor messages that cross between members.
var floorMessages = []actors.Option{
	actors.WithMessage[*floorStart]("bench.floor.start"),
	actors.WithMessage[*floorPart]("bench.floor.part"),
}

// The messages below stay on their member.
type (
	// floorVisit is a round's message to one account, the i-th of its
	// member's.
	floorVisit struct {
		part *memberPart
		i    int
	}
	// floorTick is the coordinator's schedule: start a round.
	floorTick struct{}
	// partWritten says that a member's part of round is durable in its
	// own file, or err.
	partWritten struct {
		round uint64
		count int
		err   error
	}
	// roundSaved says that the coordinator's save of round is over.
	roundSaved struct {
		round uint64
		err   error
	}
)

// memberPart is one member's part of a round, filled in by its accounts
// on their goroutines: the last one hands it to the member's collector.
type memberPart struct {
	round    uint64
	fm       *floorMember
	states   [][]byte   // by account; nil in floorTouch
	inFlight [][][]byte // by account, its transfers (floorWithInFlight)
	left     atomic.Int64
}

// floorAccount is bankdemo's account with a floor round's message more:
// a transfer is the same work as in the actorsnap rows.
type floorAccount struct {
	bankdemo.Account
}

func (a *floorAccount) Receive(ctx actor.Context) {
	v, ok := ctx.Message().(*floorVisit)
	if !ok {
		a.Account.Receive(ctx)
		return
	}
	p := v.part
	if p.states != nil {
		state, err := msgpack.Marshal(&a.Account)
		if err != nil {
			p.fm.fail(err)
		}
		p.states[v.i] = state
	}
	if p.inFlight != nil {
		msgs := make([][]byte, p.fm.inFlight)
		for j := range msgs {
			data, err := msgpack.Marshal(&bankdemo.Transfer{Amount: a.Balance / int64(j+2)})
			if err != nil {
				p.fm.fail(err)
			}
			msgs[j] = data
		}
		p.inFlight[v.i] = msgs
	}
	if p.left.Add(-1) == 0 {
		p.fm.sys.Root().Send(p.fm.collector, p)
	}
}

// floorCollector is a member's collector of floor rounds. It is a
// participant so that what it sends another member's collector crosses
// the cluster's link. No snapshot is ever taken of it.
type floorCollector struct {
	actors.Stateless
	fm *floorMember
}

func (c *floorCollector) Receive(ctx actor.Context) {
	fm := c.fm
	switch m := ctx.Message().(type) {
	case *floorTick:
		fm.tick(ctx)
	case *floorStart:
		fm.begin(m.Round)
	case *memberPart:
		fm.captured(ctx, m)
	case *partWritten:
		if m.err != nil {
			fm.fail(m.err)
			return
		}
		fm.report(ctx, &floorPart{Round: m.round, Count: m.count})
	case *floorPart:
		fm.arrive(m)
	case *roundSaved:
		fm.saved(m)
	}
}

// floorMember is one member's side of a floor row.
type floorMember struct {
	kind     floorKind
	store    persistence.Store // where the coordinator saves (floorToCoordinator)
	dir      string            // where this member writes its parts (floorLocalParts)
	timeout  time.Duration
	total    int          // accounts on all members
	inFlight int          // transfers each account started (floorWithInFlight)
	done     *completions // rounds complete, on the coordinator

	sys         *actors.System
	coord       bool
	members     int
	accounts    []*actor.PID // this member's, in name order
	names       []string
	collector   *actor.PID   // this member's collector
	coordinator *actor.PID   // the coordinator's collector
	peers       []*actor.PID // the other members' collectors
	collectors  []string     // every member's collector's name
	writes      chan *memberPart
	saves       chan *snapshot.Global

	// The coordinator's rounds, on its collector's goroutine.
	round  uint64
	rounds map[uint64]*floorRound
	saving int

	mu  sync.Mutex
	err error
}

// floorRound is a round in progress, on the coordinator.
type floorRound struct {
	start time.Time
	heard int // members whose part arrived
	count int // accounts that took part
	parts []snapshot.Participant
	chans []snapshot.ChannelState // transfers in flight (floorWithInFlight)
}

// options are the floor row's kinds and messages: accounts that take
// the rounds, and the collector.
func (fm *floorMember) options() []actors.Option {
	return append([]actors.Option{
		actors.WithKind("account", func() actor.Actor { return &floorAccount{Account: bankdemo.Account{Balance: initial}} }),
		actors.WithKind("floor-collector", func() actor.Actor { return &floorCollector{fm: fm} }),
	}, floorMessages...)
}

// collectorName is the name of member addr's collector: the first of
// floor-collector-0, -1, … that placement puts on addr.
func collectorName(addr string, members []string) string {
	for k := 0; ; k++ {
		name := fmt.Sprintf("floor-collector-%d", k)
		if placement.Owner(name, members) == addr {
			return name
		}
	}
}

// start spawns the member's collector, once the member's accounts are
// spawned (pids, in name order).
func (fm *floorMember) start(m *cluster.Member, pids []*actor.PID) error {
	fm.sys = m.System()
	members := m.Members()
	fm.members = len(members)
	fm.coord = m.Coordinator() == m.Self()
	fm.accounts = pids
	for _, pid := range pids {
		fm.names = append(fm.names, pid.Id)
	}
	for _, addr := range members {
		name := collectorName(addr, members)
		fm.collectors = append(fm.collectors, name)
		if addr != m.Self() {
			fm.peers = append(fm.peers, fm.sys.PID(name))
		}
	}
	fm.coordinator = fm.sys.PID(collectorName(m.Coordinator(), members))
	fm.rounds = map[uint64]*floorRound{}
	// At most 2×DefaultConcurrent rounds are in progress (tick): the
	// queues never fill.
	if fm.kind == floorLocalParts {
		fm.writes = make(chan *memberPart, 2*actors.DefaultConcurrent)
		go fm.writer()
	}
	if fm.kind.toCoordinator() && fm.coord {
		fm.saves = make(chan *snapshot.Global, 2*actors.DefaultConcurrent)
		go fm.saver()
	}
	own := collectorName(m.Self(), members)
	if !m.Owns(own) {
		return fmt.Errorf("floor: %s is not placed on %s", own, m.Self())
	}
	pid, err := fm.sys.Spawn("floor-collector", own)
	if err != nil {
		return err
	}
	fm.collector = pid
	return nil
}

// every starts the coordinator's rounds, one every d from now on, until
// the member's process ends.
func (fm *floorMember) every(d time.Duration) {
	if !fm.coord {
		return
	}
	go func() {
		t := time.NewTicker(d)
		for range t.C {
			fm.sys.Root().Send(fm.collector, &floorTick{})
		}
	}()
}

// tick starts a round on every member, unless as many run as
// SnapshotEvery would allow: DefaultConcurrent in progress, twice that
// with those saving.
func (fm *floorMember) tick(ctx actor.Context) {
	if len(fm.rounds)-fm.saving >= actors.DefaultConcurrent || len(fm.rounds) >= 2*actors.DefaultConcurrent {
		return
	}
	fm.round++
	fm.rounds[fm.round] = &floorRound{start: time.Now()}
	for _, pid := range fm.peers {
		ctx.Send(pid, &floorStart{Round: fm.round})
	}
	fm.begin(fm.round)
}

// begin posts round's message to each of the member's accounts.
func (fm *floorMember) begin(round uint64) {
	p := &memberPart{round: round, fm: fm}
	p.left.Store(int64(len(fm.accounts)))
	if fm.kind != floorTouch {
		p.states = make([][]byte, len(fm.accounts))
	}
	if fm.kind == floorWithInFlight {
		p.inFlight = make([][][]byte, len(fm.accounts))
	}
	root := fm.sys.Root()
	for i, pid := range fm.accounts {
		root.Send(pid, &floorVisit{part: p, i: i})
	}
}

// captured takes the member's part once every account of the member took
// part: it goes to the coordinator, or to this member's file first.
func (fm *floorMember) captured(ctx actor.Context, p *memberPart) {
	switch fm.kind {
	case floorToCoordinator, floorWithInFlight:
		fm.report(ctx, &floorPart{Round: p.round, Count: len(p.states), Names: fm.names, States: p.states, InFlight: p.inFlight})
	case floorLocalParts:
		fm.writes <- p
	default:
		fm.report(ctx, &floorPart{Round: p.round, Count: len(fm.accounts)})
	}
}

// report gives the member's part to the coordinator's collector: over
// the link, or directly on the coordinator.
func (fm *floorMember) report(ctx actor.Context, part *floorPart) {
	if fm.coord {
		fm.arrive(part)
		return
	}
	ctx.Send(fm.coordinator, part)
}

// arrive takes a member's part on the coordinator. Once every member's
// is there the round is complete, or, in floorToCoordinator, its Global
// goes to the saver.
func (fm *floorMember) arrive(part *floorPart) {
	r := fm.rounds[part.Round]
	if r == nil {
		return
	}
	r.heard++
	r.count += part.Count
	if fm.kind.toCoordinator() {
		for i, name := range part.Names {
			r.parts = append(r.parts, snapshot.Participant{ID: snapshot.ProcessID(name), Kind: "account", State: part.States[i]})
			if i < len(part.InFlight) && len(part.InFlight[i]) > 0 {
				r.chans = append(r.chans, inFlightChannel(name, fm.total, part.InFlight[i]))
			}
		}
	}
	if r.heard < fm.members {
		return
	}
	if r.count != fm.total {
		fm.fail(fmt.Errorf("round %d: %d accounts took part, want %d", part.Round, r.count, fm.total))
	}
	if !fm.kind.toCoordinator() {
		delete(fm.rounds, part.Round)
		fm.done.add(time.Since(r.start), 0)
		return
	}
	slices.SortFunc(r.parts, func(a, b snapshot.Participant) int { return strings.Compare(string(a.ID), string(b.ID)) })
	fm.saving++
	slices.SortFunc(r.chans, func(a, b snapshot.ChannelState) int {
		return cmp.Or(strings.Compare(string(a.Channel.From), string(b.Channel.From)), strings.Compare(string(a.Channel.To), string(b.Channel.To)))
	})
	fm.saves <- &snapshot.Global{ID: snapshot.SnapshotID(part.Round), Start: r.start, End: time.Now(), Participants: r.parts, Channels: r.chans}
}

// toCoordinator reports whether k's rounds send the states to the
// coordinator, which saves them.
func (k floorKind) toCoordinator() bool { return k == floorToCoordinator || k == floorWithInFlight }

// inFlightChannel is the channel state a floor round saves for the
// transfers account name (of accounts) took after its state, in the
// order taken: one channel into it, from its predecessor on the bank's
// ring (the floor does not track senders).
func inFlightChannel(name string, accounts int, transfers [][]byte) snapshot.ChannelState {
	i, _ := strconv.Atoi(strings.TrimPrefix(name, "acct-"))
	from := snapshot.ProcessID(bankdemo.Name((i + accounts - 1) % accounts))
	c := snapshot.ChannelState{Channel: snapshot.Channel{From: from, To: snapshot.ProcessID(name)}, Sent: uint64(len(transfers))}
	c.Messages = make([]snapshot.Message, len(transfers))
	for j, data := range transfers {
		c.Messages[j] = snapshot.Message{Seq: uint64(j + 1), Payload: actors.RecordedMessage{Type: "bank.transfer", Data: data}}
	}
	return c
}

// saved ends a round whose save is over.
func (fm *floorMember) saved(m *roundSaved) {
	r := fm.rounds[m.round]
	delete(fm.rounds, m.round)
	fm.saving--
	if m.err != nil {
		fm.fail(m.err)
		return
	}
	fm.done.add(time.Since(r.start), 0)
}

// saver saves the coordinator's rounds in the store, in order, with
// retention after each, as actorsnap's saver does.
func (fm *floorMember) saver() {
	for g := range fm.saves {
		ctx, cancel := context.WithTimeout(context.Background(), fm.timeout)
		err := fm.store.Save(ctx, g)
		if err == nil {
			err = fm.store.Retain(ctx, floorRetain)
		}
		cancel()
		fm.sys.Root().Send(fm.collector, &roundSaved{round: uint64(g.ID), err: err})
	}
}

// writer writes the member's parts to its own files, in order.
func (fm *floorMember) writer() {
	for p := range fm.writes {
		err := fm.writePart(p)
		fm.sys.Root().Send(fm.collector, &partWritten{round: p.round, count: len(p.states), err: err})
	}
}

// writePart writes p durably to a file of its own, encoded as the file
// store encodes a snapshot, as the file store makes a save durable:
// written under a temporary name and synced, renamed into place, the
// directory synced. The part floorRetain rounds older goes.
func (fm *floorMember) writePart(p *memberPart) error {
	g := &snapshot.Global{ID: snapshot.SnapshotID(p.round), Participants: make([]snapshot.Participant, len(p.states))}
	for i, state := range p.states {
		g.Participants[i] = snapshot.Participant{ID: snapshot.ProcessID(fm.names[i]), Kind: "account", State: state}
	}
	data, err := persistence.EncodeGlobal(g)
	if err != nil {
		return err
	}
	name := filepath.Join(fm.dir, fmt.Sprintf("part-%020d", p.round))
	f, err := os.Create(name + ".tmp")
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(name+".tmp", name)
	}
	if err == nil {
		err = syncDir(fm.dir)
	}
	if err != nil {
		return err
	}
	if p.round > floorRetain {
		err = os.Remove(filepath.Join(fm.dir, fmt.Sprintf("part-%020d", p.round-floorRetain)))
		if errors.Is(err, fs.ErrNotExist) {
			err = nil
		}
	}
	return err
}

// syncDir makes the names in directory dir durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

// fail keeps the first error of the floor's rounds.
func (fm *floorMember) fail(err error) {
	fm.mu.Lock()
	defer fm.mu.Unlock()
	if fm.err == nil {
		fm.err = fmt.Errorf("floor: %w", err)
	}
}

// failed returns the first error of the floor's rounds.
func (fm *floorMember) failed() error {
	fm.mu.Lock()
	defer fm.mu.Unlock()
	return fm.err
}
