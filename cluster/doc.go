// Package cluster runs an actorsnap system across the members of a
// Proto.Actor cluster: one consistent snapshot of every participant on
// every member, and every message in flight between them.
//
// A Member joins a Proto.Actor cluster (package membership: etcd, or the
// automanaged provider that needs no server), starts one endpoint over
// Proto.Actor remote whose links carry the members' traffic once and in
// order whatever the connections do (packages endpoint and link), and
// runs an actors.System on it with that transport (actors.WithTransport).
//
// Placement is by name: the participant named n lives on the member that
// rendezvous hashing over the member list gives (package placement), so
// every member computes every name's place alike and a change of members
// moves only the names of the members that came or went. Member.PID, or
// actors.SystemOf(ctx).PID inside a participant, gives a name's PID, and
// ctx.Send and ctx.Request to it work as they do locally.
//
// The coordinator is the member with the lowest address in the member
// list. When it leaves, the next lowest takes over: it claims the store
// the members share and numbers after the highest id the store holds and
// the last start it saw, so ids keep increasing.
//
// A cluster is closed with membership.Config.TLS (membership.LoadTLS
// reads an authority's certificate and a member's certificate and key):
// every connection between members, Proto.Actor's gossip included, is
// mutual TLS 1.3, so a process without a certificate of the authority
// can neither join nor deliver a message, and each member logs the
// handshakes it refuses. The provider's own traffic is not covered: the
// etcd client speaks plaintext to etcd, and the automanaged provider
// serves each member's id, address, kinds and cluster name over plain
// HTTP. The membership is trusted: whoever can write the members' keys
// in etcd, or answer at a seed's automanaged port, can list a member
// that is none; it can deliver nothing, but the others count it, and with
// the lowest address it would be taken for the coordinator.
package cluster
