// Package snapshot is the Chandy–Lamport snapshot algorithm, and Flink's
// aligned variant, as a pure state machine: no goroutines, no I/O, no
// clock. It takes consistent global
// snapshots of a system of processes (in actorsnap, actors) that exchange
// messages over one-way FIFO channels: every process's state plus every
// message in flight, taken while the system keeps running.
//
// # The algorithm
//
// A snapshot is initiated at one process, or at every process by a
// coordinator that has a control channel to each (broadcast). A process
// that initiates, or that receives the first marker of a snapshot on any
// channel, records its local state, sends a marker on every outgoing
// channel, and starts recording every other incoming channel. A later
// marker on a channel closes that channel's recording: its state is the
// messages received on it after the local record and before the marker.
// The recorded states and channel states together form a consistent cut:
// every message reflected as received was sent before its sender recorded,
// and every message sent before that and not yet received is in exactly one
// channel state. Several snapshots may run at once; a message recorded for
// several of them is held once.
//
// Channels need not be declared. A process's outgoing channels are those it
// has sent on, its incoming channels those it has received from. The one
// subtle case is a channel first used after its sender recorded a snapshot:
// no marker went on it. So the first message on every channel carries the
// snapshots its sender has recorded (Stamp.Recorded); for those it acts as
// a marker, and for the others the receiver records it as channel state.
//
// # The aligned mode
//
// With Config.Mode = Aligned (Flink's asynchronous barrier snapshotting) a
// marker is a barrier: the first for a snapshot on a channel blocks the
// channel (Ready.Pause: the caller holds that sender's messages), and the
// process records once barriers came on every incoming channel it waits
// for, then unblocks (Ready.Resume). Channels it waited for have empty
// state. It does not wait on back edges (Config.BackEdges; BackEdges finds
// a set that breaks every cycle), nor on channels SetAwaited leaves out:
// those are logged from the record until their barrier, as in the
// unaligned mode, which is what keeps every cut consistent whatever is
// waited for. A coordinator starts an aligned snapshot with Start (wait
// for barriers) rather than Initiate (record now). aligned.go states the
// rules for concurrent snapshots and new channels.
//
// Completion is decided by counters, not local guesswork: each LocalRecord
// holds, per outgoing channel, the messages sent before it and, per incoming
// channel, the messages received before it. An Assembler declares a
// snapshot complete once every participant recorded and every channel
// balances, sent-before = received-before + recorded. The same check,
// Global.Verify, proves a stored snapshot consistent and catches a lost or
// duplicated message. In the Epochs mode with a Ledger the channels into
// one receiver are judged together: the sum of what was sent to it before
// its senders' records = what it received before its record + what it
// reported; the epoch rule keeps every channel from being over, so the
// sum balances only when each channel does. Counting in sums
// (Config.Sums, CoordinatorConfig.Sums), each record carries two totals
// and no count per channel, and a snapshot is complete when everything
// sent before the records was received before them or is in flight, as
// in Mattern's sum counters (sums.go).
//
// # Driving a Process
//
// The caller owns the transport, as with etcd's raft. For each process:
//
//  1. Create it with NewProcess, declaring any channels known up front.
//  2. Before sending an application message, call Send and carry the
//     returned Stamp with the message, on the same FIFO path.
//  3. On receiving an application message, call Receive with its sender and
//     stamp before the application sees it. An error means the channel is
//     not FIFO and exactly-once (a message lost, duplicated or reordered):
//     the snapshots in progress cannot complete and should be aborted.
//     In the aligned mode Ready.Hold may say to hold the message instead
//     of delivering it, and give it again once IsBlocked says its sender
//     is no longer blocked.
//  4. On receiving a marker, call Marker; to start a snapshot here, call
//     Initiate; on a coordinator's broadcast start, call Start (the same
//     as Initiate in the unaligned mode).
//  5. After every call, if HasReady, take Ready and carry it out in order
//     before the application runs again: capture the local state once for
//     every LocalRecord in Records, without the message whose Receive
//     produced it; send each marker in Markers on the path application
//     messages take, before any later application message; hand Records
//     (with State filled) and Channels to the snapshot's Assembler; in the
//     aligned mode, stop delivering from the senders in Pause and resume
//     those in Resume, their held messages first. Then call Advance.
//  6. When a snapshot is complete or aborted, call Forget on every process
//     (and carry out Ready after it: forgetting an aligned snapshot still
//     pending unblocks its channels). Until then each process keeps what it
//     recorded for it.
//
// Snapshot ids come from one allocator, densely and increasingly.
//
// # The coordinator
//
// A Coordinator is that allocator, and the rest of the coordination, as a
// pure state machine in the same style: its caller feeds it the starts it
// wants (Start), what the processes produce (Record, Channel), what the
// membership does (Stopped, Stopping, SentTo, Join, Require,
// RequireChild, Fail), aborts (Abort) and the time (Tick), and carries
// out CoordinatorReady in the order of its fields: initiate sweeps, store each complete Global and have every
// process forget a snapshot that is over (Forget), have the peers of a
// drained stopped process drop it (DropPeer), hand out the aligned mode's
// awaited sets, and start snapshots (broadcast or at an initiator). It
// keeps the Assemblers of the runs in progress and their deadlines, and
// which participants each requires: those live at its start, those born
// or joining while it runs, and the stopped ones, which stand in with
// their final counters until a complete snapshot started after their stop
// shows them drained. The simulator in snapshottest and the guardian in
// package actors both drive it.
//
// # Analyses
//
// A stable property (one that, once true, stays true) that held when a
// snapshot began holds in its consistent cut, and one that holds in the
// cut held by the snapshot's end, so a cut detects it safely (Chandy and
// Lamport 1985). Each participant's record says what it waited for (Waits:
// requests not answered, declared waits, AND or OR), and two analyses read
// a Global with it. Deadlocks reduces the wait-for graph in the AND and OR
// models of Chandy, Misra and Haas (1983): a participant is active if it
// waits for nothing, has a timer set, or has a message in flight to it; a
// waiter is freed once all (AND) or one (OR) of those it waits for is
// free; what is left is deadlocked, reported as one Deadlock per cycle or
// knot with the waiters blocked on it. A reply in flight frees its waiter,
// so the report has no false positives; FindDeadlocks runs the same
// reduction on books kept outside a snapshot. Quiescent tests for
// termination: nothing in flight, no request unanswered, no timer set (a
// declared wait alone is idle).
//
// # Glossary
//
// One word for each concept, in the code, the docs and the errors:
//
//   - process: the algorithm's view of one participant (a Process).
//     participant: an actor that takes part in snapshots (package
//     actors); a snapshot's participants are the processes it holds.
//   - channel: the one-way FIFO path from a sender to a receiver.
//   - marker: the control message that splits a channel's traffic into
//     before and after a snapshot; in the aligned mode it is a barrier,
//     which also blocks the channel until the receiver records.
//   - initiate: record a snapshot now and send its markers. start: the
//     coordinator's broadcast (in the aligned mode: wait for barriers).
//   - record: what a process does when it captures its local state for a
//     snapshot (a LocalRecord: its state and its counters).
//   - recording: the messages of one incoming channel logged from the
//     receiver's record until the channel's marker; it closes into a
//     ChannelRecord, whose messages are the channel's state.
//   - cut: the records of one snapshot; consistent when every message a
//     record counts as received was sent before its sender recorded.
//   - in flight: a message sent before its sender's record and received
//     after its receiver's: it is in its channel's state.
//   - pending, complete, aborted: a snapshot in progress, and the two
//     ways it ends; over: complete or aborted. finished (Ready.Finished):
//     every recording this process knows of closed, which is not over.
//     forget: let a snapshot go once it is over everywhere.
//   - held: a message not delivered yet because its channel is blocked
//     (aligned mode; Ready.Pause, Ready.Hold, Ready.Resume).
//   - back edge: a channel that a snapshot does not wait on in the
//     aligned mode, so that waits cannot form a cycle.
//   - stopped: a participant that has stopped; nothing more comes from
//     it. departed: how a stopped participant stands in a snapshot it had
//     not recorded (Participant.Departed): no state, its final counters.
//     lost: a message that reached a stopped participant.
//   - ledger (Epochs mode): the sums, per receiver, of what its senders'
//     records say they sent it, kept across snapshots, so that a record
//     lists only the sent counts that changed since the process's
//     previous one (LocalRecord.Changes, each with its prior count) and
//     one number for all it received (LocalRecord.ReceivedTotal), and
//     completion is judged per receiver; in step: a process whose counts
//     the sums hold as of its last record; resync: a process asked to
//     list them all again (after a record was lost, every process).
//   - sums (Config.Sums): a process's two totals, sent and received;
//     base: the totals of the processes dropped so far, which every
//     later snapshot counts (AssemblerConfig.Base); lost, in sums: a
//     message a stopping process never received (Process.Lose), or one
//     that met it after its stop (Coordinator.Lost).
//   - drained: a stopped participant every message of which a complete
//     snapshot shows received. dropped: drained and forgotten by its
//     peers (DropPeer); its name may then be given to a new participant.
//
// # Threading
//
// A Process is not safe for concurrent use: drive it from its process's own
// goroutine (in actorsnap, the actor's), which also keeps each process's
// events in the order the algorithm needs. An Assembler, a Ledger and a
// Coordinator are not safe for concurrent use either; one goroutine (the
// guardian) owns each, and a Ledger and the Assemblers given it belong to
// the same one. A
// Numbering, taken from a complete Assembler and given to the next
// (AssemblerConfig.Numbering), is immutable and may be shared. Values
// returned by Ready are valid until Advance; LocalRecord and ChannelRecord
// values may be kept, and their Messages slices are shared read-only views.
// Global values are immutable once built.
//
// The package snapshottest holds a deterministic simulated network and the
// invariant checkers the tests use; they serve users' own tests as well.
package snapshot
