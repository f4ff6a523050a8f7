// Package endpoint carries byte messages from one cluster member to
// another over Proto.Actor remote, each member pair through a reliable
// link (package link): every message is delivered once and in order
// however often the connection between them breaks, and a sender is
// pushed back (link.ErrFull) rather than holding more than the link's
// window while a peer is slow or away.
//
// Each member runs one Endpoint: an actor named EndpointName that
// receives its peers' frames (package wire) and delivers their messages,
// an actor named AckName that receives their acknowledgements (so that
// these never wait behind deliveries), and a goroutine that resends what
// is not acknowledged in time. Remote
// connections that end (remote.EndpointTerminatedEvent) make the link to
// that peer resend at once.
package endpoint
