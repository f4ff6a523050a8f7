package after

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/actorsnap/actorsnap/actors"
)

// Config describes a run.
type Config struct {
	Shards int    // counting actors, at least one
	Rounds int    // lines each shard reads
	Words  int    // words per line
	Seed   uint64 // shard i reads with seed Seed+i
}

// Result is the number of times each word was read.
type Result map[string]int

// Messages. The coordinator sends each shard Peers, then Read each round;
// a shard asks the owners of its words to count them (Words, answered by
// Ack), then sends Done. Last, each shard answers Report with its Counts.
type Peers struct{ Shards []*actor.PID }
type Read struct{ Round int }
type Words struct{ Words []string }
type Ack struct{}
type Done struct{}
type Report struct{}
type Counts struct{ Counts map[string]int }
type GetResult struct{}

const coordinatorName = "coordinator"

// Options register the messages that may be in flight between actors and
// the kinds a restore rebuilds: for actors.NewSystem and actors.Restore.
var Options = []actors.Option{
	actors.WithMessage[Peers]("wordcount.Peers"),
	actors.WithMessage[Read]("wordcount.Read"),
	actors.WithMessage[Words]("wordcount.Words"),
	actors.WithMessage[Ack]("wordcount.Ack"),
	actors.WithMessage[Done]("wordcount.Done"),
	actors.WithMessage[Report]("wordcount.Report"),
	actors.WithMessage[Counts]("wordcount.Counts"),
	actors.WithKind("coordinator", newCoordinator(Config{})),
	actors.WithKind("shard", newShard(0, 0, 0)),
}

var vocabulary = strings.Fields("actor channel cut marker message mailbox snapshot state future peer round shard")

// Line returns the words a shard reads in a round.
func Line(seed uint64, round, n int) []string {
	r := rand.New(rand.NewPCG(seed, uint64(round)))
	words := make([]string, n)
	for i := range words {
		words[i] = vocabulary[r.IntN(len(vocabulary))]
	}
	return words
}

// owner returns the index of the shard that counts word.
func owner(word string, shards int) int { return slices.Index(vocabulary, word) % shards }

// shard counts the words it owns.
type shard struct {
	Index, Words int
	Seed         uint64
	Peers        []*actor.PID
	Counts       map[string]int
	Pending      int // requests not yet acknowledged
}

func newShard(index int, seed uint64, words int) actor.Producer {
	return func() actor.Actor {
		return &shard{Index: index, Seed: seed, Words: words, Counts: map[string]int{}}
	}
}

func (s *shard) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *Peers:
		s.Peers = m.Shards
	case *Read:
		others := make([][]string, len(s.Peers))
		for _, w := range Line(s.Seed, m.Round, s.Words) {
			if o := owner(w, len(s.Peers)); o == s.Index {
				s.Counts[w]++
			} else {
				others[o] = append(others[o], w)
			}
		}
		for o, words := range others {
			if len(words) > 0 {
				ctx.Request(s.Peers[o], &Words{Words: words})
				s.Pending++
			}
		}
		s.done(ctx)
	case *Words:
		for _, w := range m.Words {
			s.Counts[w]++
		}
		ctx.Respond(&Ack{})
	case *Ack:
		s.Pending--
		s.done(ctx)
	case *Report:
		ctx.Respond(&Counts{Counts: maps.Clone(s.Counts)})
	}
}

// done tells the coordinator once every word of the round is counted.
func (s *shard) done(ctx actor.Context) {
	if s.Pending == 0 {
		ctx.Send(ctx.Parent(), &Done{})
	}
}

// coordinator spawns the shards, runs the rounds and adds up the counts.
type coordinator struct {
	Cfg      Config
	Children []*actor.PID
	Round    int // the round running
	Finished int // shards done with the round
	Reported int // shards that reported their counts
	Result   Result
	waiter   *actor.PID `msgpack:"-"` // who asked for the result
	err      error      `msgpack:"-"`
}

func newCoordinator(cfg Config) actor.Producer {
	return func() actor.Actor { return &coordinator{Cfg: cfg} }
}

func (c *coordinator) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		if c.Round > 0 {
			return // restored: the shards and the rounds go on
		}
		for i := range c.Cfg.Shards {
			props := actor.PropsFromProducer(newShard(i, c.Cfg.Seed+uint64(i), c.Cfg.Words), actors.SystemOf(ctx).Snapshotted("shard"))
			pid, err := ctx.SpawnNamed(props, fmt.Sprintf("shard%d", i))
			if err != nil {
				c.err = err
				return
			}
			c.Children = append(c.Children, pid)
		}
		for _, pid := range c.Children {
			ctx.Send(pid, &Peers{Shards: c.Children})
		}
		c.next(ctx)
	case *Done:
		if c.Finished++; c.Finished == len(c.Children) {
			c.next(ctx)
		}
	case *Counts:
		for w, n := range m.Counts {
			c.Result[w] += n
		}
		c.Reported++
		c.answer(ctx)
	case *GetResult:
		c.waiter = ctx.Sender()
		c.answer(ctx)
	}
}

// next starts the next round or, after the last, asks for the counts.
func (c *coordinator) next(ctx actor.Context) {
	c.Finished = 0
	if c.Round++; c.Round > c.Cfg.Rounds {
		c.Result = Result{}
	}
	for _, pid := range c.Children {
		if c.Result != nil {
			ctx.Request(pid, &Report{})
		} else {
			ctx.Send(pid, &Read{Round: c.Round})
		}
	}
}

// answer gives the waiter the result once every shard has reported.
func (c *coordinator) answer(ctx actor.Context) {
	if c.waiter != nil && c.err != nil {
		ctx.Send(c.waiter, c.err)
	} else if c.waiter != nil && c.Reported == c.Cfg.Shards {
		ctx.Send(c.waiter, maps.Clone(c.Result))
	}
}

// Run counts the words cfg describes.
func Run(ctx context.Context, cfg Config) (Result, error) {
	system, err := Start(cfg)
	if err != nil {
		return nil, err
	}
	defer system.Shutdown(ctx)
	return Wait(ctx, system.ActorSystem())
}

// Start starts an actor system, with opts (actors.WithStore, say), and the
// coordinator of a run.
func Start(cfg Config, opts ...actors.Option) (*actors.System, error) {
	system, err := actors.NewSystem(slices.Concat(Options, opts)...)
	if err != nil {
		return nil, err
	}
	props := actor.PropsFromProducer(newCoordinator(cfg), system.Snapshotted("coordinator"))
	if _, err := system.Root().SpawnNamed(props, coordinatorName); err != nil {
		system.Shutdown(context.Background())
		return nil, err
	}
	return system, nil
}

// Wait asks the coordinator for the result of the run, until ctx ends.
func Wait(ctx context.Context, system *actor.ActorSystem) (Result, error) {
	timeout := time.Minute
	if d, ok := ctx.Deadline(); ok {
		timeout = time.Until(d)
	}
	coordinator := system.NewLocalPID(coordinatorName)
	reply, err := system.Root.RequestFuture(coordinator, &GetResult{}, timeout).Result()
	if err != nil {
		return nil, err
	}
	if err, ok := reply.(error); ok {
		return nil, err
	}
	return reply.(Result), nil
}
