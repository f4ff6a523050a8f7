package actors

import (
	"context"
	"sync/atomic"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/actorsnap/actorsnap/snapshot"
)

// metrics are the OpenTelemetry instruments of the guardian.
type metrics struct {
	started, completed, aborted metric.Int64Counter
	duration                    metric.Float64Histogram
	stateBytes, recorded        metric.Int64Histogram
	violations, deadlocks       metric.Int64Counter
	// recordsAll and recordsChanges count the records taken in, by what
	// they list; an observable counter reads them. A record comes per
	// participant per snapshot: a synchronous counter's Add allocates its
	// options each call.
	recordsAll, recordsChanges atomic.Int64
}

func newMetrics(mp metric.MeterProvider) (*metrics, error) {
	m := mp.Meter("github.com/actorsnap/actorsnap/actors")
	var ms metrics
	var err error
	if ms.started, err = m.Int64Counter("actorsnap.snapshots.started", metric.WithDescription("Snapshots started.")); err != nil {
		return nil, err
	}
	if ms.completed, err = m.Int64Counter("actorsnap.snapshots.completed", metric.WithDescription("Snapshots complete and stored.")); err != nil {
		return nil, err
	}
	if ms.aborted, err = m.Int64Counter("actorsnap.snapshots.aborted", metric.WithDescription("Snapshots aborted, by reason.")); err != nil {
		return nil, err
	}
	if ms.duration, err = m.Float64Histogram("actorsnap.snapshot.duration", metric.WithUnit("s"), metric.WithDescription("Time from initiation to completion.")); err != nil {
		return nil, err
	}
	if ms.stateBytes, err = m.Int64Histogram("actorsnap.snapshot.state_bytes", metric.WithUnit("By"), metric.WithDescription("Bytes of recorded actor state per snapshot.")); err != nil {
		return nil, err
	}
	if ms.recorded, err = m.Int64Histogram("actorsnap.snapshot.recorded_messages", metric.WithDescription("Messages recorded in flight per snapshot.")); err != nil {
		return nil, err
	}
	if ms.violations, err = m.Int64Counter("actorsnap.invariants.violated", metric.WithDescription("Snapshots that broke an invariant, by invariant.")); err != nil {
		return nil, err
	}
	if ms.deadlocks, err = m.Int64Counter("actorsnap.deadlocks.found", metric.WithDescription("Deadlocks the periodic check found, each once.")); err != nil {
		return nil, err
	}
	all := metric.WithAttributes(attribute.String("lists", "all"))
	changes := metric.WithAttributes(attribute.String("lists", "changes"))
	if _, err = m.Int64ObservableCounter("actorsnap.records",
		metric.WithDescription("Participants' records the coordinator took in, by what their counters list: all, or changes since the last (epoch mode, participants with many channels)."),
		metric.WithInt64Callback(func(_ context.Context, o metric.Int64Observer) error {
			o.Observe(ms.recordsAll.Load(), all)
			o.Observe(ms.recordsChanges.Load(), changes)
			return nil
		})); err != nil {
		return nil, err
	}
	return &ms, nil
}

// record counts a record the coordinator took in.
func (m *metrics) record(rec *snapshot.LocalRecord) {
	if !rec.Changes {
		m.recordsAll.Add(1)
	} else {
		m.recordsChanges.Add(1)
	}
}

func (m *metrics) abort(reason string) {
	m.aborted.Add(context.Background(), 1, metric.WithAttributes(attribute.String("reason", reason)))
}
