// Package snapshottest is a deterministic, simulated network for testing
// the snapshot algorithm, and the invariant checkers that judge every
// snapshot it produces. It is exported so that users can test their own
// transports and applications against the same checks.
//
// A Network runs one snapshot.Process per node of a directed Graph. Each
// channel is a FIFO link; in the random mode every message gets a delay of
// 1 to MaxDelay ticks drawn from the seed, so a run replays exactly from its
// seed. In the manual mode messages wait until Deliver, which the golden
// scenario scripts use. The network drives a snapshot.Coordinator, which
// numbers snapshots, starts them at one process (markers then flood the
// graph) or at all of them (broadcast on the network's control channels),
// assembles them, and says when one is finished and when a stopped
// process is dropped; the network carries that out.
//
// A Trace records who sent, received and recorded what, in each process's
// own order. Its checkers hold any snapshot.Global to the definition of a
// consistent snapshot:
//
//   - CheckCut: every message whose receipt a recorded state reflects was
//     sent before its sender recorded;
//   - CheckChannels: the state of each channel is exactly the messages sent
//     before its sender recorded and received after its receiver recorded,
//     in order;
//   - CheckConservation: the value in recorded states plus the value in
//     recorded messages equals the total (tokens, money).
//
// Bank is the token application the tests run: balances moving along the
// graph's edges, whose total any inconsistency would change. BankRun runs
// it with random traffic and concurrent snapshots and applies every check.
package snapshottest
