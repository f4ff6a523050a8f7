package before

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/asynkron/protoactor-go/actor"
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
	index, words int
	seed         uint64
	peers        []*actor.PID
	counts       map[string]int
	pending      int // requests not yet acknowledged
}

func newShard(index int, seed uint64, words int) actor.Producer {
	return func() actor.Actor {
		return &shard{index: index, seed: seed, words: words, counts: map[string]int{}}
	}
}

func (s *shard) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *Peers:
		s.peers = m.Shards
	case *Read:
		others := make([][]string, len(s.peers))
		for _, w := range Line(s.seed, m.Round, s.words) {
			if o := owner(w, len(s.peers)); o == s.index {
				s.counts[w]++
			} else {
				others[o] = append(others[o], w)
			}
		}
		for o, words := range others {
			if len(words) > 0 {
				ctx.Request(s.peers[o], &Words{Words: words})
				s.pending++
			}
		}
		s.done(ctx)
	case *Words:
		for _, w := range m.Words {
			s.counts[w]++
		}
		ctx.Respond(&Ack{})
	case *Ack:
		s.pending--
		s.done(ctx)
	case *Report:
		ctx.Respond(&Counts{Counts: maps.Clone(s.counts)})
	}
}

// done tells the coordinator once every word of the round is counted.
func (s *shard) done(ctx actor.Context) {
	if s.pending == 0 {
		ctx.Send(ctx.Parent(), &Done{})
	}
}

// coordinator spawns the shards, runs the rounds and adds up the counts.
type coordinator struct {
	cfg      Config
	children []*actor.PID
	round    int // the round running
	finished int // shards done with the round
	reported int // shards that reported their counts
	result   Result
	waiter   *actor.PID // who asked for the result
	err      error
}

func newCoordinator(cfg Config) actor.Producer {
	return func() actor.Actor { return &coordinator{cfg: cfg} }
}

func (c *coordinator) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		for i := range c.cfg.Shards {
			props := actor.PropsFromProducer(newShard(i, c.cfg.Seed+uint64(i), c.cfg.Words))
			pid, err := ctx.SpawnNamed(props, fmt.Sprintf("shard%d", i))
			if err != nil {
				c.err = err
				return
			}
			c.children = append(c.children, pid)
		}
		for _, pid := range c.children {
			ctx.Send(pid, &Peers{Shards: c.children})
		}
		c.next(ctx)
	case *Done:
		if c.finished++; c.finished == len(c.children) {
			c.next(ctx)
		}
	case *Counts:
		for w, n := range m.Counts {
			c.result[w] += n
		}
		c.reported++
		c.answer(ctx)
	case *GetResult:
		c.waiter = ctx.Sender()
		c.answer(ctx)
	}
}

// next starts the next round or, after the last, asks for the counts.
func (c *coordinator) next(ctx actor.Context) {
	c.finished = 0
	if c.round++; c.round > c.cfg.Rounds {
		c.result = Result{}
	}
	for _, pid := range c.children {
		if c.result != nil {
			ctx.Request(pid, &Report{})
		} else {
			ctx.Send(pid, &Read{Round: c.round})
		}
	}
}

// answer gives the waiter the result once every shard has reported.
func (c *coordinator) answer(ctx actor.Context) {
	if c.waiter != nil && c.err != nil {
		ctx.Send(c.waiter, c.err)
	} else if c.waiter != nil && c.reported == c.cfg.Shards {
		ctx.Send(c.waiter, maps.Clone(c.result))
	}
}

// Run counts the words cfg describes.
func Run(ctx context.Context, cfg Config) (Result, error) {
	system, err := Start(cfg)
	if err != nil {
		return nil, err
	}
	defer system.Shutdown()
	return Wait(ctx, system)
}

// Start starts an actor system and the coordinator of a run.
func Start(cfg Config) (*actor.ActorSystem, error) {
	system := actor.NewActorSystem()
	props := actor.PropsFromProducer(newCoordinator(cfg))
	if _, err := system.Root.SpawnNamed(props, coordinatorName); err != nil {
		system.Shutdown()
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
