package main

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/vmihailenco/msgpack/v5"

	"github.com/actorsnap/actorsnap/actors"
)

// The model: agents on a square grid of regions, each agent susceptible,
// infected or recovered (SIR). Each tick, in each region, a susceptible
// agent is infected with probability 1-exp(-β·I/N) (I infected among the N
// agents of its region) or else vaccinated with probability v, an infected
// one recovers with probability γ, and then every agent moves to a
// neighbouring region (north, east, south or west, those that exist) with
// probability m.
//
// A region advances from tick t to t+1 once it has every neighbour's Move
// of tick t: no clock and no barrier, only the messages. Every draw comes
// from the region's own generator, in the order of its agents, and
// arriving agents join in the order of the neighbours, never of arrival;
// so a run's result depends on the seed and the parameters only, whatever
// the scheduling, and a run restored from a snapshot ends as one never
// interrupted.

// Health is an agent's state.
type Health uint8

// The healths of the SIR model.
const (
	Susceptible Health = iota // may be infected
	Infected                  // infects others in its region, until it recovers
	Recovered                 // recovered or vaccinated: immune for the rest of the run
)

// Params are the model's probabilities, per agent and tick.
type Params struct {
	Infection   float64 // β: the infection rate of an agent among infected ones only
	Recovery    float64 // γ: an infected agent recovers
	Move        float64 // m: an agent moves to a neighbouring region
	Vaccination float64 // v: a susceptible agent that escaped infection is vaccinated
}

// set sets the parameter key names to v.
func (p *Params) set(key string, v float64) error {
	switch key {
	case "infection":
		p.Infection = v
	case "recovery":
		p.Recovery = v
	case "move":
		p.Move = v
	case "vaccination":
		p.Vaccination = v
	default:
		return fmt.Errorf("unknown parameter %q (want infection, recovery, move or vaccination)", key)
	}
	return nil
}

// check says which parameter is not a probability.
func (p Params) check() error {
	for _, x := range []struct {
		name string
		v    float64
	}{{"infection", p.Infection}, {"recovery", p.Recovery}, {"move", p.Move}, {"vaccination", p.Vaccination}} {
		if !(x.v >= 0 && x.v <= 1) { // NaN fails too
			return fmt.Errorf("%s %v outside 0..1", x.name, x.v)
		}
	}
	return nil
}

// Setting is one parameter a fork changes (--set key=value).
type Setting struct {
	Key   string
	Value float64
}

// Fork records a change of parameters in a region: from tick Tick on,
// the region runs with Params.
type Fork struct {
	Tick   int
	Params Params
}

// Agents is a group of agents, one column per attribute: a region's
// population, or the agents one Move carries.
type Agents struct {
	ID     []uint32
	Health []Health
}

// EncodeMsgpack implements msgpack.CustomEncoder: the columns are an
// array of two byte strings, the ids little-endian. A region's tens of
// thousands of agents then encode as two passes over the columns, written
// through a small buffer straight into the encoder's output, not as that
// many reflected elements each: the default encoding made a snapshot of
// the default grid cost 190 ms of CPU in the regions' turns.
func (a Agents) EncodeMsgpack(enc *msgpack.Encoder) error {
	if err := enc.EncodeArrayLen(2); err != nil {
		return err
	}
	var chunk [4 << 10]byte
	w := enc.Writer()
	if err := enc.EncodeBytesLen(4 * len(a.ID)); err != nil {
		return err
	}
	for ids := a.ID; len(ids) > 0; {
		b := chunk[:0]
		for len(ids) > 0 && len(b) < len(chunk) {
			b = binary.LittleEndian.AppendUint32(b, ids[0])
			ids = ids[1:]
		}
		if _, err := w.Write(b); err != nil {
			return err
		}
	}
	if err := enc.EncodeBytesLen(len(a.Health)); err != nil {
		return err
	}
	for hs := a.Health; len(hs) > 0; {
		n := min(len(hs), len(chunk))
		for i, h := range hs[:n] {
			chunk[i] = byte(h)
		}
		if _, err := w.Write(chunk[:n]); err != nil {
			return err
		}
		hs = hs[n:]
	}
	return nil
}

// DecodeMsgpack implements msgpack.CustomDecoder.
func (a *Agents) DecodeMsgpack(dec *msgpack.Decoder) error {
	n, err := dec.DecodeArrayLen()
	if err != nil {
		return err
	}
	if n != 2 {
		return fmt.Errorf("agents: %d columns, want 2", n)
	}
	ids, err := dec.DecodeBytes()
	if err != nil {
		return err
	}
	hs, err := dec.DecodeBytes()
	if err != nil {
		return err
	}
	if len(ids) != 4*len(hs) {
		return fmt.Errorf("agents: %d bytes of ids for %d healths", len(ids), len(hs))
	}
	if len(hs) == 0 {
		a.ID, a.Health = nil, nil // as the default encoding brings back none
		return nil
	}
	a.ID, a.Health = make([]uint32, len(hs)), make([]Health, len(hs))
	for i, h := range hs {
		if Health(h) > Recovered {
			return fmt.Errorf("agents: health %d", h)
		}
		a.ID[i], a.Health[i] = binary.LittleEndian.Uint32(ids[4*i:]), Health(h)
	}
	return nil
}

func (a *Agents) add(id uint32, h Health) {
	a.ID, a.Health = append(a.ID, id), append(a.Health, h)
}

// Counts are agents by health.
type Counts struct{ S, I, R int }

func (a *Agents) counts() Counts {
	var c Counts
	for _, h := range a.Health {
		switch h {
		case Susceptible:
			c.S++
		case Infected:
			c.I++
		default:
			c.R++
		}
	}
	return c
}

// History holds a region's counts at each tick it has reached, one column
// per health: S[t] is the susceptible agents in the region at tick t.
type History struct {
	S, I, R []int32
}

func (h *History) add(c Counts) {
	h.S, h.I, h.R = append(h.S, int32(c.S)), append(h.I, int32(c.I)), append(h.R, int32(c.R))
}

// At returns the counts at tick t.
func (h *History) At(t int) Counts {
	return Counts{S: int(h.S[t]), I: int(h.I[t]), R: int(h.R[t])}
}

// Messages between participants; exported fields, so that a snapshot can
// record them in flight.
type (
	// Setup gives a region its place and its agents at tick 0: sent by
	// the grid once to each region it spawns.
	Setup struct {
		Index, Side int
		First       uint32 // the id of the region's first agent
		Agents      int    // agents in the region at tick 0
		Infected    int    // of them infected
		Ticks       int    // the run ends at this tick
		Seed        uint64
		Params      Params
	}
	// Move carries the agents that leave region From for the receiver in
	// tick Tick. Each region sends each neighbour exactly one Move a
	// tick, empty or not: that a neighbour's Move came is how a region
	// knows it may advance.
	Move struct {
		Tick, From int
		Agents     Agents
	}
)

// messages registers the message types.
var messages = []actors.Option{
	actors.WithMessage[*Setup]("epidemic.Setup"),
	actors.WithMessage[*Move]("epidemic.Move"),
}

// Kinds and names of the participants. Regions are the grid's children:
// their ids are gridName/r000, gridName/r001, ...
const (
	gridKind, regionKind = "grid", "region"
	gridName             = "grid"
)

func regionName(i int) string { return fmt.Sprintf("r%03d", i) }

func regionID(i int) string { return gridName + "/" + regionName(i) }

// Each actor's exported fields are its state in a snapshot; a restore
// overwrites what the producer set.

// grid spawns the regions, as its children, and sends each its Setup, all
// in its first turn: a snapshot sees either no region or all of them with
// their Setup on its way, and no region sends a Move before its
// neighbours exist. Restored from a snapshot taken after that turn, it
// does nothing (Spawned).
type grid struct {
	Side, Agents, Infected, Ticks int
	Seed                          uint64
	Params                        Params
	Spawned                       bool

	tally *tally `msgpack:"-"`
}

func (g *grid) Receive(ctx actor.Context) {
	if _, ok := ctx.Message().(*actor.Started); !ok || g.Spawned {
		return
	}
	props := actors.SystemOf(ctx).Props(regionKind)
	pids := make([]*actor.PID, g.Side*g.Side)
	for i := range pids {
		pid, err := ctx.SpawnNamed(props, regionName(i))
		if err != nil {
			g.tally.fail(fmt.Errorf("spawning region %d: %w", i, err))
			return
		}
		pids[i] = pid
	}
	centre := g.Side/2*g.Side + g.Side/2
	for i, pid := range pids {
		s := &Setup{Index: i, Side: g.Side, First: uint32(i * g.Agents), Agents: g.Agents, Ticks: g.Ticks, Seed: g.Seed, Params: g.Params}
		if i == centre {
			s.Infected = min(g.Infected, g.Agents)
		}
		ctx.Send(pid, s)
	}
	g.Spawned = true
}

// region is one square of the grid and the agents in it.
type region struct {
	Index, Side int
	Ticks       int // the run ends at this tick
	Params      Params
	Forks       []Fork // parameter changes, oldest first
	Tick        int    // the tick Agents are at
	Sent        bool   // this tick's Moves are sent: waiting for the neighbours'
	Agents      Agents
	Pending     []Move // neighbours' Moves of this tick or the next, in arrival order
	History     History
	RNG         *rand.PCG // the region's generator: every draw of the model

	tally *tally     `msgpack:"-"`
	set   []Setting  `msgpack:"-"` // a fork's changes, applied at the first message
	rnd   *rand.Rand `msgpack:"-"` // draws from RNG
}

func (r *region) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		if r.Side == 0 {
			return // its Setup is on its way
		}
		r.fork()
		r.tally.reached(r.Index, r.Tick, r.History.At(r.Tick).I)
		if r.Tick == r.Ticks { // restored from a snapshot of a finished run
			r.finish()
		}
	case *Setup:
		r.setup(m)
		r.fork()
		r.run(ctx)
	case *Move:
		r.Pending = append(r.Pending, *m)
		if r.Side > 0 { // else it waits for the region's Setup
			r.run(ctx)
		}
	}
}

func (r *region) setup(s *Setup) {
	r.Index, r.Side, r.Ticks, r.Params = s.Index, s.Side, s.Ticks, s.Params
	r.RNG = rand.NewPCG(s.Seed, uint64(s.Index))
	for k := range s.Agents {
		h := Susceptible
		if k < s.Infected {
			h = Infected
		}
		r.Agents.add(s.First+uint32(k), h)
	}
	r.History.add(r.Agents.counts())
	r.tally.reached(r.Index, 0, s.Infected)
}

// fork applies the changes the producer was given, once, from the next
// tick the region computes.
func (r *region) fork() {
	if r.set == nil {
		return
	}
	p := r.Params
	for _, s := range r.set {
		_ = p.set(s.Key, s.Value) // checked when parsed
	}
	r.set = nil
	if p == r.Params {
		return
	}
	r.Params = p
	tick := r.Tick
	if r.Sent {
		tick++
	}
	r.Forks = append(r.Forks, Fork{Tick: tick, Params: p})
}

// run computes ticks while the neighbours' Moves allow: the tick's moves
// are sent, then the region waits for every neighbour's. A region without
// neighbours runs to the end at once.
func (r *region) run(ctx actor.Context) {
	for r.Tick < r.Ticks {
		if !r.Sent {
			r.step(ctx)
		}
		if !r.ready() {
			return
		}
		r.advance()
	}
	r.finish()
}

// neighbours returns the indices of the region's neighbours, in the order
// their agents join it: north, east, south, west.
func (r *region) neighbours() []int {
	x, y := r.Index%r.Side, r.Index/r.Side
	ns := make([]int, 0, 4)
	if y > 0 {
		ns = append(ns, r.Index-r.Side)
	}
	if x < r.Side-1 {
		ns = append(ns, r.Index+1)
	}
	if y < r.Side-1 {
		ns = append(ns, r.Index+r.Side)
	}
	if x > 0 {
		ns = append(ns, r.Index-1)
	}
	return ns
}

// step computes tick r.Tick: infections, recoveries and vaccinations,
// then moves, and sends each neighbour its Move.
func (r *region) step(ctx actor.Context) {
	if r.rnd == nil {
		r.rnd = rand.New(r.RNG) // draws advance RNG itself
	}
	p, a := r.Params, &r.Agents
	var infection float64
	if n := len(a.ID); n > 0 {
		infection = 1 - math.Exp(-p.Infection*float64(r.History.At(r.Tick).I)/float64(n))
	}
	for k, h := range a.Health {
		u := r.rnd.Float64()
		switch {
		case h == Susceptible && u < infection:
			a.Health[k] = Infected
		case h == Susceptible && p.Vaccination > 0 && r.rnd.Float64() < p.Vaccination:
			a.Health[k] = Recovered
		case h == Infected && u < p.Recovery:
			a.Health[k] = Recovered
		}
	}
	ns := r.neighbours()
	out := make([]Agents, len(ns))
	kept := 0
	for k := range a.ID {
		if len(ns) > 0 && r.rnd.Float64() < p.Move {
			out[r.rnd.IntN(len(ns))].add(a.ID[k], a.Health[k])
			continue
		}
		a.ID[kept], a.Health[kept] = a.ID[k], a.Health[k]
		kept++
	}
	a.ID, a.Health = a.ID[:kept], a.Health[:kept]
	for i, n := range ns {
		ctx.Send(ctx.ActorSystem().NewLocalPID(regionID(n)), &Move{Tick: r.Tick, From: r.Index, Agents: out[i]})
	}
	r.Sent = true
}

// ready reports whether every neighbour's Move of this tick has come.
func (r *region) ready() bool {
	for _, n := range r.neighbours() {
		if r.pending(n) < 0 {
			return false
		}
	}
	return true
}

// pending returns the index in Pending of neighbour n's Move of this
// tick, or -1.
func (r *region) pending(n int) int {
	for i, m := range r.Pending {
		if m.Tick == r.Tick && m.From == n {
			return i
		}
	}
	return -1
}

// advance takes the agents of this tick's Moves in, in the order of the
// neighbours, and moves on to the next tick.
func (r *region) advance() {
	for _, n := range r.neighbours() {
		m := &r.Pending[r.pending(n)]
		r.Agents.ID = append(r.Agents.ID, m.Agents.ID...)
		r.Agents.Health = append(r.Agents.Health, m.Agents.Health...)
		m.Tick = -1 // taken
	}
	var later []Move // Moves of the next tick, from neighbours ahead
	for _, m := range r.Pending {
		if m.Tick >= 0 {
			later = append(later, m)
		}
	}
	r.Pending = later
	r.Tick++
	r.Sent = false
	c := r.Agents.counts()
	r.History.add(c)
	r.tally.reached(r.Index, r.Tick, c.I)
}

// finish hands the region's final state to the tally.
func (r *region) finish() {
	r.tally.finished(r.Index, final{Tick: r.Tick, Counts: r.History.At(r.Tick), Digest: r.digest()})
}

// digest is the SHA-256 of the region's whole state, in a fixed layout
// (not msgpack's, which tells nil from empty).
func (r *region) digest() [sha256.Size]byte {
	var b []byte
	num := func(xs ...uint64) {
		for _, x := range xs {
			b = binary.LittleEndian.AppendUint64(b, x)
		}
	}
	params := func(p Params) {
		num(math.Float64bits(p.Infection), math.Float64bits(p.Recovery), math.Float64bits(p.Move), math.Float64bits(p.Vaccination))
	}
	agents := func(a Agents) {
		num(uint64(len(a.ID)))
		for k := range a.ID {
			num(uint64(a.ID[k]), uint64(a.Health[k]))
		}
	}
	num(uint64(r.Index), uint64(r.Side), uint64(r.Ticks), uint64(r.Tick))
	params(r.Params)
	num(uint64(len(r.Forks)))
	for _, f := range r.Forks {
		num(uint64(f.Tick))
		params(f.Params)
	}
	agents(r.Agents)
	num(uint64(len(r.Pending)))
	for _, m := range r.Pending {
		num(uint64(m.Tick), uint64(m.From))
		agents(m.Agents)
	}
	num(uint64(len(r.History.S)))
	for t := range r.History.S {
		c := r.History.At(t)
		num(uint64(c.S), uint64(c.I), uint64(c.R))
	}
	if r.RNG != nil {
		g, _ := r.RNG.MarshalBinary() // never fails
		b = append(b, g...)
	}
	return sha256.Sum256(b)
}
