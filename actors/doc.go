// Package actors takes consistent global snapshots of a live Proto.Actor
// system: every participant's state and every message in flight between
// participants, while the actors keep running.
//
// # Use
//
// A Proto.Actor program takes snapshots by building its actor system
// through NewSystem, registering the message types that may be in flight,
// and adding one option to the Props of the actors that take part:
//
//	sys, err := actors.NewSystem(
//		actors.WithMessage[*Transfer]("bank.transfer"), // may be recorded in flight
//		actors.WithKind("account", newAccount),         // what Restore rebuilds "account"s from
//		actors.WithStore(store))
//	props := actor.PropsFromProducer(newAccount, sys.Snapshotted("account"))
//	pid, err := sys.Root().SpawnNamed(props, "alice") // any spawn call, anywhere
//	...
//	g, err := sys.Snapshot(ctx)    // complete, verified and stored
//	sys.SnapshotEvery(time.Second) // or on a schedule (also WithInterval)
//
// Participants are the actors spawned from Props with Snapshotted (or
// System.Props of a kind), by any of Proto.Actor's spawn calls: from the
// root context, from any actor, or as children. A participant's id is its
// PID's id. Its Receive gets a context whose sends to other participants
// are stamped and posted straight into the receiver's per-sender queue
// (package mailbox): FIFO per channel, markers in line with data, and no
// envelope, middleware or header map on the way. Send, Request,
// RequestFuture, Respond, Forward and Poison keep their Proto.Actor
// meaning. Props options that would change that (actor.WithMailbox,
// actor.WithDispatcher, actor.WithSenderMiddleware) fail the spawn with
// ErrProps rather than being overridden.
//
// Nothing is lost in silence. An actor type whose state would not survive
// a snapshot (an unexported field, a channel, no field at all) fails its
// first spawn, and a message type that would not fails its registration,
// with ErrLossy and an error naming the type, the field and the fixes:
// export the field, tag it msgpack:"-" (wiring such as PIDs), implement
// StateMarshaler and StateUnmarshaler, or embed Stateless in an actor
// that keeps no state.
//
// Participants run on a small pool of workers (as many as cores, at least
// two) taking mailbox turns in FIFO order. A participant that blocks in
// its turn (waiting on a future, say) holds its worker; once a turn has
// lasted about 50 ms another worker is added, and it ends when the blocked
// turn does. Blocking is allowed but slow: prefer replies as messages.
//
// # What a snapshot holds
//
//   - Each participant's state, captured on its goroutine between two
//     messages: MarshalState if the actor implements StateMarshaler, else
//     its exported fields encoded with msgpack.
//   - Each channel's messages in flight, for message types registered with
//     WithMessage (a type and its pointer are one registration; each is
//     restored in the form it was sent). A snapshot that meets an
//     unregistered type is aborted with an error naming the type; the
//     application keeps running. DecodeState and DecodeAs read a stored
//     snapshot's states and messages as typed values.
//   - The counters that prove the cut consistent (snapshot.Global.Verify).
//
// A message recorded in flight keeps its sender and headers: after a
// restore, a Request recorded in flight arrives as a request, and Respond
// answers the participant that asked.
//
// Outside every snapshot: messages from senders that are not participants
// (the root context, timers, futures, plain actors) and replies to futures.
// What a participant received from them before it recorded is in its state;
// nothing else of theirs is captured. An application that needs its
// external input inside the cut routes it through an Ingress, a participant
// that records how much it has forwarded.
//
// # Modes and initiation
//
// The epoch mode (Lai–Yang's colours with Mattern's counters, the
// default) sends no marker: every message carries its sender's epoch, and
// a snapshot costs per participant and per message in flight, not per
// channel. The unaligned mode (WithMode(snapshot.Unaligned), Chandy–Lamport
// as published) sends a marker on every channel used. Neither makes an
// actor wait; both store the messages in flight. The aligned mode
// (WithMode(snapshot.Aligned), Flink's barriers) pauses a sender at its
// barrier until the receiver has barriers from every sender it waits for;
// channels it waited for hold no state, and back edges (declared with
// WithBackEdges, or found by WithBackEdgeSearch from the channel graph the
// guardian learns from each completed snapshot) are logged instead, so
// that no cycle waits for itself. See WithMode for the rules when channels
// appear during a snapshot. A snapshot stores its mode, and Restore takes
// it.
//
// The guardian starts a snapshot by broadcast on its control channel to every
// participant (the default), or at one participant with markers flooding
// the channel graph (WithInitiation(Flooding)); participants no channel
// leads to are then started by the guardian after a quarter of the timeout.
// In the epoch mode a broadcast start is recorded ahead of the messages
// queued for each participant, and those queued from older epochs are
// taken as the channels' state at once (WithInitiation(InOrder) reads the
// start in its turn instead); WithInitiation(Lazy) lets each participant
// record at its next message.
//
// # Lifecycle
//
//   - A participant spawned by another participant that had not yet
//     recorded a snapshot in progress takes part in it; one spawned after
//     its parent recorded only in later ones. One spawned from outside
//     every participant (the root context, a plain actor) while snapshots
//     run takes part in them with its state at birth (a participant that has not recorded one may already send to
//     it by name).
//   - A participant that stops while a snapshot is in progress: if it had
//     not recorded it, it stands in it as departed, without state, with its
//     final counters (it never had a marker of that snapshot, so all it
//     received was sent before its senders recorded: the cut may pass
//     after its stop); if it had, its record stands and its recordings
//     close with what came, unless a message sent to it before the cut
//     was still on its way and is lost with it, which aborts the snapshot
//     with ErrParticipantStopped naming it. Messages sent to it after it
//     stopped are dead letters.
//   - A participant that crashes and is restarted by its supervisor aborts
//     every snapshot in progress it takes part in, with
//     ErrParticipantRestarted naming it: the state the snapshot is built
//     on is gone.
//   - Later snapshots name a stopped participant as departed, with its
//     final counters, while its peers' records still count their channels
//     with it (also messages its receivers read after it stopped). Once a
//     complete snapshot shows everything it sent received, the guardian
//     drops it, at a moment no snapshot runs (a snapshot asked for while
//     one runs and a drop waits is postponed until then), and its peers
//     forget their channels with it before their next record: snapshots
//     follow the live system, not its history, however many participants
//     come and go.
//     Until then its name is refused (ErrNameStopped); afterwards a new
//     participant may take it, and its channels start afresh (a late
//     departure of the old one does not touch them).
//   - A snapshot not complete within its timeout is aborted with
//     snapshot.ErrTimeout and what it waited for. The previous complete
//     snapshot stays the latest in the store.
//   - Shutdown aborts the snapshots in progress, stops every participant
//     and releases the store.
//
// # Stores
//
// A system saves its snapshots in one store (WithStore; in memory by
// default, keeping the 16 newest) and owns it: NewSystem claims the store for the system named
// by WithSystemName (DefaultSystemName, "default", unless given; keep it
// stable across runs) and holds it until Shutdown. A store that holds or
// has held snapshots belongs to the system that wrote them: NewSystem is
// refused it with persistence.ErrOwned, naming the owner, so that two
// systems never mix their snapshots; Restore continues that system,
// taking the store over (persistence.ClaimRestore) before it reads the
// snapshot. While a system runs, another NewSystem or Restore on its
// store is refused with persistence.ErrLocked. A system numbers its
// snapshots after every id its store has held, deleted and damaged ones
// included, so ids never repeat. A save that fails aborts its snapshot
// with ErrSave and the store's error; later snapshots still run.
//
// # Observability
//
// Completions and aborts are published on the actor system's event stream
// as pointers (*SnapshotCompleted, *SnapshotAborted), logged through the
// *slog.Logger of WithLogger (which Proto.Actor logs through too), and counted through the OpenTelemetry MeterProvider of
// WithMeterProvider: actorsnap.snapshots.started, .completed, .aborted (by
// reason), actorsnap.snapshot.duration, .state_bytes and
// .recorded_messages, and actorsnap.records (by what their counters
// list: all, or changes since the last).
package actors
