package actors

import (
	"context"
	"sync"
	"time"

	"github.com/actorsnap/actorsnap/persistence"
	"github.com/actorsnap/actorsnap/snapshot"
)

// saver writes complete snapshots to the store on a goroutine of its
// own, in the order they completed, and applies retention after each; the
// guardian goes on meanwhile. It tells the guardian (notify) each time a
// save is over; the guardian takes the outcomes (outcomes).
type saver struct {
	store      persistence.Store
	timeout    time.Duration
	retain     int
	invariants []invariant
	notify     func()

	jobs chan saveJob
	done chan struct{}

	mu  sync.Mutex
	out []saveOutcome
}

type saveJob struct {
	id snapshot.SnapshotID
	gl *snapshot.Global
}

// saveOutcome is the outcome of saving snapshot id: err if the save
// failed, retainErr if retention after it did.
type saveOutcome struct {
	id             snapshot.SnapshotID
	err, retainErr error
}

// maxSaving is the room for saves waiting: the guardian refuses a start
// while 2×WithMaxConcurrent snapshots are in progress or saving, so the
// queue never fills and save never blocks.
const maxSaving = 2 * MaxConcurrent

func newSaver(store persistence.Store, timeout time.Duration, retain int, invariants []invariant, notify func()) *saver {
	s := &saver{store: store, timeout: timeout, retain: retain, invariants: invariants, notify: notify,
		jobs: make(chan saveJob, maxSaving), done: make(chan struct{})}
	go s.run()
	return s
}

func (s *saver) run() {
	defer close(s.done)
	for job := range s.jobs {
		out := s.saveOne(job)
		s.mu.Lock()
		s.out = append(s.out, out)
		s.mu.Unlock()
		s.notify()
	}
}

func (s *saver) saveOne(job saveJob) saveOutcome {
	ctx, cancel := context.WithTimeout(context.Background(), s.timeout)
	defer cancel()
	// Checked here, off the guardian, and stored with the snapshot.
	job.gl.Violations = checkInvariants(s.invariants, job.gl)
	out := saveOutcome{id: job.id, err: s.store.Save(ctx, job.gl)}
	if out.err == nil && s.retain > 0 {
		out.retainErr = s.store.Retain(ctx, s.retain)
	}
	return out
}

// save queues snapshot id, complete as gl, for saving.
func (s *saver) save(id snapshot.SnapshotID, gl *snapshot.Global) {
	s.jobs <- saveJob{id: id, gl: gl}
}

// outcomes returns the outcomes of the saves over since the last call.
func (s *saver) outcomes() []saveOutcome {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := s.out
	s.out = nil
	return out
}

// close waits for the saves queued to end, stops the goroutine and
// returns the outcomes not taken yet. Nothing may be saved afterwards.
func (s *saver) close() []saveOutcome {
	close(s.jobs)
	<-s.done
	return s.outcomes()
}
