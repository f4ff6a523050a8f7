// Package actorstest checks that an actorsnap system can be stopped and
// resumed without changing its answer: the contract a simulation that is
// checkpointed must keep.
//
// Check runs a Simulation twice. The first run goes uninterrupted to its
// end. The second is interrupted at moments drawn from a seed: each time
// it takes a snapshot, runs on past it for a while (work a crash would
// lose), shuts the system down and restores the snapshot into a new
// system, which goes on from there. At the end of each run Check takes a
// final snapshot, and the two must hold the same participants with the
// same states and the same messages in flight. If they do not, Check
// fails with the first participant (by id) whose state differs, and what
// in it differs, decoded field by field where the state is msgpack.
//
// The moments are shares of the first run's time. A second run that goes
// faster can end before its first interruption, which would then check
// nothing: when the first interruption's snapshot already equals the
// first run's end, Check begins the second run again with moments twice
// as early (Report.Late counts these), up to six times.
//
// # What makes a simulation resumable
//
// A restored participant has exactly the state its snapshot holds and the
// messages that were in flight to it, nothing else. So its next steps
// must follow from those alone:
//
//   - Every random-number generator is part of the state: store the
//     generator itself (math/rand/v2's PCG and ChaCha8 marshal to bytes),
//     not a seed, and never a generator kept in a field that is not
//     encoded (msgpack:"-") or shared between actors.
//   - No reads of the wall clock, the process id or anything else outside
//     the messages: a step that depends on time.Now differs after a
//     restore.
//   - No dependence on the order messages from different senders arrive
//     in: a step waits for what it needs (for example its neighbours'
//     messages of a tick) and combines them in an order of its own, such
//     as by sender name.
//   - No Go map iteration order in results: iterate over sorted keys.
//
// Check finds a simulation that breaks one of these rules only when the
// broken rule changes a result during the run; a seed that interrupts at
// other moments may find more, so run it with several seeds.
package actorstest
