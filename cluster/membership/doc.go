// Package membership makes an actor system a member of a Proto.Actor
// cluster (github.com/asynkron/protoactor-go/cluster) and tells which
// members are alive: the list that a global snapshot across processes
// needs to know whom to wait for.
//
// Join starts Proto.Actor remote and a cluster member on an actor system,
// with one of two of Proto.Actor's own cluster providers:
//
//   - Etcd: members register under a lease of an etcd server, kept alive
//     while the process lives. A member killed without a word (SIGKILL) is
//     dropped when its lease expires, within Config.TTL (etcd raises a TTL
//     below its minimum, 2 s with etcd's default election timeout, to that
//     minimum). A member that leaves deletes its key and is dropped at once.
//     Each member writes its key again, unchanged, every Config.TTL: the
//     provider follows changes through a watch opened after its first
//     read of the members, and would never see one that registered in
//     between; the rewrite is a change it sees, within one TTL.
//   - Automanaged: no external server. Each member serves its own state
//     over HTTP on Config.AutomanagedPort and polls every seed's port each
//     Config.TTL; the members are the seeds that answer. The seed list is
//     fixed: a member joins later only on a port that the others already
//     list. Meant for demos and tests on loopback.
//
// A member is named by its remote address host:port, the Address of every
// actor.PID on it. Members returns the sorted list of the current members,
// this one included, as Proto.Actor's member list last published it
// (cluster.ClusterTopology); Watch delivers each new list.
//
// The cluster has no kinds of ours (Proto.Actor adds its own pub-sub topic
// kind): membership is all this package takes from it.
package membership
