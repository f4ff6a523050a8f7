// Package link is a reliable FIFO link from one cluster member to
// another, over a transport that keeps order while a connection lives but
// loses what is in flight when it breaks, as Proto.Actor remote does:
// every message is delivered once, in order, or the link says it cannot
// go on.
//
// A Sender numbers messages from 1, sends them in frames of up to
// Config.Batch messages, keeps each until the Receiver acknowledges it
// (acknowledgements are cumulative: every message through a number), and
// sends again everything not acknowledged, from the first such message
// (go back N), when Config.Resend passes without progress or when the
// caller says the connection was made again (Reset). The Receiver
// delivers the next message in order and drops duplicates and messages
// after a gap; its acknowledgement tells the Sender where to go on from.
// Send refuses a message past Config.Window messages or
// Config.WindowBytes bytes not acknowledged (ErrFull): a sender never
// holds more than that while its peer is slow or away, and the caller
// pushes back on whoever feeds it. Due tells the caller when to transmit
// after a Send: at once on an idle link, and under load as soon as a
// whole frame waits, so that frames pipeline up to the window rather than
// wait for acknowledgements.
//
// A Sender belongs to one session, a number that grows each time its
// member starts: a Receiver that sees a newer session starts counting
// again from 1, and drops the frames of older ones.
//
// Like package snapshot's state machines, Sender and Receiver do no I/O,
// start no goroutine and read no clock: time is an argument. Neither is
// safe for concurrent use.
package link
