package actors

import (
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/vmihailenco/msgpack/v5"

	"github.com/actorsnap/actorsnap/internal/msgpackbound"
	"github.com/actorsnap/actorsnap/mailbox"
	"github.com/actorsnap/actorsnap/snapshot"
)

// Transport connects a System to the other members of a cluster: package
// cluster implements it over Proto.Actor remote. With a Transport, a
// participant sends to a participant on another member with the same
// ctx.Send and ctx.Request it uses locally (the PID's Address names the
// member), and one guardian, on the member Coordinator names, coordinates
// every snapshot of the cluster while the others fan its starts out to
// their own participants and send their participants' records to it.
//
// The Transport must deliver what Send is given to the named member
// exactly once and in order with everything sent there before (FIFO per
// member pair): the snapshots' channels between members are as ordered
// as the transport, and their counters show a message lost or repeated.
type Transport interface {
	// Attach starts the transport on the System's actor system (its
	// remote, membership and links). It is called once, by NewSystem,
	// before any participant runs.
	Attach(a Attachment) error
	// Self is this member's address: the Address of its participants'
	// PIDs.
	Self() string
	// Members returns the members' addresses, sorted, this one included.
	Members() []string
	// Coordinator is the address of the member whose guardian coordinates
	// the snapshots.
	Coordinator() string
	// Owner returns the address of the member a participant named name
	// lives on, by a placement every member computes alike.
	Owner(name string) string
	// Send carries b to member to, after everything sent to it before. It
	// may block while the link to that member is full (back-pressure),
	// and fails when the member has left.
	Send(to string, b []byte) error
	// Detach leaves the cluster. Shutdown calls it once the participants
	// have stopped; it may shut the actor system down.
	Detach()
}

// PID returns the PID of the participant named name: on this system, or
// in a cluster on the member that hosts the name (Transport.Owner). A
// participant reaches any other by name with it, through SystemOf(ctx),
// wherever the two live.
func (s *System) PID(name string) *actor.PID {
	if t := s.cfg.transport; t != nil {
		return actor.NewPID(t.Owner(name), name)
	}
	return actor.NewPID(s.actors.Address(), name)
}

// Attachment is what a System gives its Transport.
type Attachment struct {
	// Actors is the System's actor system.
	Actors *actor.ActorSystem
	// Deliver takes every message another member sent, in order per
	// member.
	Deliver func(from string, b []byte)
	// Messages and Kinds are the message type and kind names the system
	// registered, sorted: members must agree on them (a member with
	// others could not decode what it is sent, nor restore a
	// participant).
	Messages, Kinds []string
}

// WithTransport makes the system one member of a cluster (package
// cluster gives one). Only the coordinating member claims and writes the
// store; a member that becomes coordinator claims it then, numbering
// after the highest id it holds.
func WithTransport(t Transport) Option { return func(c *config) { c.transport = t } }

// ProtocolTraffic is what a member of a cluster has sent the other
// members for its snapshots since it started: the guardians' frames
// (starts and ends from the coordinator; reports, failures and births to
// it), and the markers and departures on channels that cross members.
// The application's own messages are not in it. It lets an operator, or
// a test, hold a snapshot's cost across the network to the design's: a
// start and an end per member, the records of a member's participants in
// a few batched sends rather than one each, and each participant's state
// sent at most once per snapshot.
type ProtocolTraffic struct {
	// Sends is the guardian's network sends: batches of frames, and
	// frames that go alone.
	Sends uint64
	// Frames is the guardian's frames, in those sends.
	Frames uint64
	// Bytes is the size of those sends.
	Bytes uint64
	// Markers is the markers and departures sent to other members'
	// participants, a send each.
	Markers uint64
	// StateBytes is the encoded state of participants in the reports
	// sent to the coordinator.
	StateBytes uint64
}

// protocolTraffic is ProtocolTraffic as it is counted: the guardian's
// counters are written on its goroutine only, Markers by every
// participant, and all read by Traffic from any goroutine.
type protocolTraffic struct {
	sends, frames, bytes, markers, state atomic.Uint64
}

// Traffic returns what this member has sent the other members for its
// snapshots (ProtocolTraffic); zero outside a cluster.
func (s *System) Traffic() ProtocolTraffic {
	t := &s.traffic
	return ProtocolTraffic{Sends: t.sends.Load(), Frames: t.frames.Load(), Bytes: t.bytes.Load(), Markers: t.markers.Load(), StateBytes: t.state.Load()}
}

// ErrMemberLeft is the reason of a snapshot aborted because a member that
// held some of its participants left the cluster.
var ErrMemberLeft = errors.New("actors: cluster member left")

// Frame kinds between members.
const (
	fMessage    uint8 = iota + 1 // a participant's message to another
	fMarker                      // a marker, on the channel From->To
	fDeparted                    // From stopped: nothing more on From->To
	fJoined                      // participants live on the sending member
	fStart                       // coordinator: start snapshot ID at your participants
	fInitiate                    // coordinator: initiate ID at To
	fOver                        // coordinator: snapshot ID is over (Err if aborted)
	fDrop                        // coordinator: forget the stopped Drops
	fReport                      // member: a participant's report
	fFail                        // member: ID cannot complete at From
	fStopped                     // member: From stopped
	fRestarted                   // member: From restarted
	fRegistered                  // member: From was born while snapshots ran
	fAsk                         // member: start a snapshot for waiter Token
	fOutside                     // a message to To from outside the snapshots
	fResync                      // coordinator: To is to list all its counters in its next record
	fResyncAll                   // a new coordinator: every participant here is to list all its counters in its next record
	fResynced                    // member: its participants were asked (fResyncAll); After, the last start it heard. Alone, never in a batch: the start gate lets it pass
	fDropped                     // member: it applied the drops up to round After
)

// fBatch begins a run of frames for the receiving member's guardian, sent
// together (guardian.post). It is no frame's kind, so that delivery tells
// a batch from a frame by its first byte and hands it on undecoded: the
// guardian decodes it on its own goroutine, not on the one that delivers
// all of a member's traffic.
const fBatch uint8 = 0xc1

// maxBatch bounds a batch's bytes, well inside the link's window and
// gRPC's message limit.
const maxBatch = 1 << 20

// forGuardian reports whether frames of kind k go to the receiving
// member's guardian, rather than being acted on as they are delivered.
func forGuardian(k uint8) bool {
	switch k {
	case fInitiate, fOver, fReport, fFail, fStopped, fRestarted, fRegistered, fAsk, fResync:
		return true
	}
	return false
}

// frame is what crosses between members: one shape for every kind, its
// fields set as the kind needs, in a binary form (framecodec.go). Its
// msgpack tags name its map form, what msgpack's reflection would make
// of it: BenchmarkGuardianBatch's baseline.
type frame struct {
	K        uint8                 `msgpack:"k"`
	From     snapshot.ProcessID    `msgpack:"f,omitempty"`
	To       snapshot.ProcessID    `msgpack:"t,omitempty"`
	ID       snapshot.SnapshotID   `msgpack:"i,omitempty"` // fStopped: the last round of drops the participant took
	Start    bool                  `msgpack:"b,omitempty"`
	Stamp    *snapshot.Stamp       `msgpack:"s,omitempty"`
	Msg      *RecordedMessage      `msgpack:"m,omitempty"`
	IDs      []snapshot.ProcessID  `msgpack:"p,omitempty"`
	Left     []snapshot.ProcessID  `msgpack:"l,omitempty"`
	Rec      *snapshot.LocalRecord `msgpack:"r,omitempty"`
	Chans    []wireChannel         `msgpack:"c,omitempty"`
	Err      string                `msgpack:"e,omitempty"`
	Recorded []snapshot.SnapshotID `msgpack:"d,omitempty"`
	After    snapshot.SnapshotID   `msgpack:"a,omitempty"`
	Drops    []snapshot.Drop       `msgpack:"x,omitempty"`
	Token    uint64                `msgpack:"o,omitempty"`
	Tokens   []uint64              `msgpack:"w,omitempty"` // fOver: the Snapshot calls it answers
	Horizon  snapshot.SnapshotID   `msgpack:"h,omitempty"`
	Finished []snapshot.SnapshotID `msgpack:"n,omitempty"`
	Sources  bool                  `msgpack:"u,omitempty"` // fStart, aligned flooding: initiate where no barrier is awaited
	Awaited  *awaitedSets          `msgpack:"q,omitempty"` // fStart, aligned: this member's awaited sets from ID on
	Probe    bool                  `msgpack:"z,omitempty"` // fStart, fAsk: a cut for an analysis, without state
	Global   *snapshot.Global      `msgpack:"g,omitempty"` // fOver: the analysis's cut, to whoever asked
}

// wireChannel is a channel recording on its way to the coordinator: its
// messages are encoded already (participant.actOnce).
type wireChannel struct {
	Snapshot snapshot.SnapshotID
	Channel  snapshot.Channel
	Seqs     []uint64
	Msgs     []RecordedMessage
}

func toWire(cs []snapshot.ChannelRecord) []wireChannel {
	out := make([]wireChannel, len(cs))
	for i, c := range cs {
		w := wireChannel{Snapshot: c.Snapshot, Channel: c.Channel, Seqs: make([]uint64, len(c.Messages)), Msgs: make([]RecordedMessage, len(c.Messages))}
		for j, m := range c.Messages {
			w.Seqs[j] = m.Seq
			w.Msgs[j], _ = m.Payload.(RecordedMessage)
		}
		out[i] = w
	}
	return out
}

func fromWire(ws []wireChannel) []snapshot.ChannelRecord {
	out := make([]snapshot.ChannelRecord, len(ws))
	for i, w := range ws {
		c := snapshot.ChannelRecord{Snapshot: w.Snapshot, Channel: w.Channel, Messages: make([]snapshot.Message, len(w.Msgs))}
		for j := range w.Msgs {
			c.Messages[j] = snapshot.Message{Seq: w.Seqs[j], Payload: w.Msgs[j]}
		}
		out[i] = c
	}
	return out
}

// sendFrame encodes f and sends it to member to. A member that left takes
// nothing more: the coordinator aborts what needed it.
func (s *System) sendFrame(to string, f *frame) {
	b, err := appendFrame(nil, f)
	if err != nil {
		s.log.Error("encoding a frame for a cluster member", slog.String("member", to), slog.Any("error", err))
		return
	}
	s.sendBytes(to, b)
}

// sendBytes sends an encoded frame to member to.
func (s *System) sendBytes(to string, b []byte) {
	if err := s.cfg.transport.Send(to, b); err != nil {
		s.log.Warn("sending to a cluster member failed", slog.String("member", to), slog.Any("error", err))
	}
}

// others returns the other members' addresses.
func (s *System) others() []string {
	self := s.cfg.transport.Self()
	return slices.DeleteFunc(s.cfg.transport.Members(), func(m string) bool { return m == self })
}

// deliver takes a frame from member from: messages between participants
// go to their receivers' queues for their senders, and the rest to the
// guardian.
func (s *System) deliver(from string, b []byte) {
	if s.held.hold(from, b) {
		return
	}
	if s.gate != nil && s.gateHold(from, b) {
		return
	}
	s.deliverNow(from, b)
}

func (s *System) deliverNow(from string, b []byte) {
	if len(b) > 0 && isChannelKind(b[0]) {
		s.deliverChannelBytes(from, b)
		return
	}
	if len(b) > 0 && b[0] == fBatch {
		s.tell(&memberBatch{from: from, b: b[1:]})
		return
	}
	var f frame
	if err := decodeFrame(b, &f, &s.interned); err != nil {
		s.log.Error("undecodable frame from a cluster member", slog.String("member", from), slog.Any("error", err))
		return
	}
	switch f.K {
	case fResyncAll:
		// On delivery, as a start is; the guardian then confirms.
		s.resyncLocal()
		s.tell(&memberFrame{from: from, f: &f})
	case fOutside:
		s.deliverOutside(&f)
	case fJoined:
		s.reg.joined(from, f.IDs, f.Left, &s.nextKey)
	case fStart:
		s.startFrame(&f)
	case fDrop:
		s.dropFrame(from, &f)
	case fDropped:
		s.reg.appliedBy(from, f.After)
	case fResynced:
		s.tell(&memberFrame{from: from, f: &f})
	default:
		if err := f.check(); err != nil {
			s.log.Error("malformed frame from a cluster member", slog.String("member", from), slog.Any("error", err))
			return
		}
		s.tell(&memberFrame{from: from, f: &f})
	}
}

// deliverChannelBytes delivers a frame of a channel between participants
// (every message from another member's participant): decoded on the
// stack, its names interned.
func (s *System) deliverChannelBytes(from string, b []byte) {
	c, err := readChannel(b, &s.interned)
	if err != nil {
		s.log.Error("undecodable frame from a cluster member", slog.String("member", from), slog.Any("error", err))
		return
	}
	s.deliverChannel(from, &c)
}

// heldFrames holds what other members send while a restore replays the
// channels into this member's queues: it is delivered after them, in
// order.
type heldFrames struct {
	mu     sync.Mutex
	on     bool
	frames []heldFrame
}

type heldFrame struct {
	from string
	b    []byte
}

// holding reports whether h holds what comes: a restore is under way.
func (h *heldFrames) holding() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.on
}

func (h *heldFrames) hold(from string, b []byte) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.on {
		h.frames = append(h.frames, heldFrame{from, b})
	}
	return h.on
}

// releaseFrames delivers the frames held, and the next ones as they come.
func (s *System) releaseFrames() {
	for {
		s.held.mu.Lock()
		frames := s.held.frames
		s.held.frames = nil
		if len(frames) == 0 {
			s.held.on = false
			s.held.mu.Unlock()
			return
		}
		s.held.mu.Unlock()
		for _, f := range frames {
			s.deliverNow(f.from, f.b)
		}
	}
}

// memberFrame is a frame for the guardian.
type memberFrame struct {
	from string
	f    *frame
}

// memberBatch is a batch of frames for the guardian, still encoded.
type memberBatch struct {
	from string
	b    []byte
}

// deliverChannel posts a participant's message, marker or departure to
// its receiver, in the queue of the remote sender's stand-in.
func (s *System) deliverChannel(from string, c *channelFrame) {
	sender := s.reg.remote(c.from, from, &s.nextKey)
	t := s.reg.lookup(c.to)
	var msg interface{}
	switch c.k {
	case fMarker:
		msg = &markerMsg{id: c.id}
	case fDeparted:
		msg = &departedMsg{}
	default:
		if !c.hasMsg {
			s.log.Error("a cluster message without payload", slog.String("from", string(c.from)))
			return
		}
		v, err := s.types.decode(c.msg)
		if err != nil {
			s.log.Error("undecodable message from a cluster member", slog.String("from", string(c.from)), slog.String("to", string(c.to)), slog.Any("error", err))
			return
		}
		msg = v
		if c.stamp != nil {
			msg = &firstMsg{stamp: *c.stamp, msg: v}
		}
	}
	if t == nil && s.holdEarly(c.to, sender.key, uint64(c.epoch), msg) {
		return
	}
	if t == nil || t.stopped.Load() {
		if c.k == fMessage {
			// Lost with its receiver, as locally: counted at its sender,
			// so a snapshot that needs it aborts rather than miss it.
			s.actors.DeadLetter.SendUserMessage(actor.NewPID(s.actors.Address(), string(c.to)), msg)
		}
		return
	}
	t.mb.PostTagged(sender.key, uint64(c.epoch), msg)
}

// holdEarly keeps a message for a participant to be born here, if the
// name is placed on this member and none of that name stopped: other
// members' participants may reach it before its spawn, which need not
// wait for theirs. It reports whether it kept msg. What no participant
// takes within the system's timeout is a dead letter, logged.
func (s *System) holdEarly(to snapshot.ProcessID, key mailbox.SenderKey, tag uint64, msg interface{}) bool {
	t := s.cfg.transport
	if t.Owner(string(to)) != t.Self() {
		return false
	}
	r := &s.reg
	r.mu.Lock()
	defer r.mu.Unlock()
	if p := r.byID[to]; p != nil {
		p.mb.PostTagged(key, tag, msg) // born meanwhile
		return true
	}
	if _, stopped := r.stopped[to]; stopped {
		return false
	}
	first := len(r.early[to]) == 0
	r.early[to] = append(r.early[to], earlyMsg{key: key, tag: tag, msg: msg})
	if first {
		s.cfg.clock.AfterFunc(s.cfg.timeout, func() {
			r.mu.Lock()
			lost := r.early[to]
			delete(r.early, to)
			r.mu.Unlock()
			if len(lost) > 0 {
				s.log.Warn("messages to a participant never born here are dead letters", slog.String("to", string(to)), slog.Int("messages", len(lost)))
				for _, e := range lost {
					s.actors.DeadLetter.SendUserMessage(actor.NewPID(s.actors.Address(), string(to)), e.msg)
				}
			}
		})
	}
	return true
}

// deliverOutside delivers a message that no snapshot counts: to a
// participant as from outside (the root context), or to a plain actor.
func (s *System) deliverOutside(f *frame) {
	if f.Msg == nil {
		return
	}
	v, err := s.types.decode(*f.Msg)
	if err != nil {
		s.log.Error("undecodable message from a cluster member", slog.String("to", string(f.To)), slog.Any("error", err))
		return
	}
	s.root.Send(actor.NewPID(s.actors.Address(), string(f.To)), v)
}

// sendOutside sends msg to pid on another member, uncounted: pid names no
// participant known here (a plain actor, or one whose member has not
// announced it yet). Only a registered type can cross.
func (p *participant) sendOutside(pid *actor.PID, msg interface{}) error {
	rm, err := p.enc.one(msg)
	if err != nil {
		return err
	}
	p.sys.sendFrame(pid.Address, &frame{K: fOutside, To: snapshot.ProcessID(pid.Id), Msg: &rm})
	return nil
}

// Reachable reports whether a participant named name is known: live on
// this system, or announced by the member of a cluster that hosts it.
// Sends to a name not reachable yet are not counted in snapshots.
func (s *System) Reachable(name string) bool {
	id := snapshot.ProcessID(name)
	if p := s.reg.lookup(id); p != nil {
		return true
	}
	return s.cfg.transport != nil && s.reg.lookupRemote(id, "") != nil
}

// sendRemote sends msg from p to participant t on another member: encoded,
// with its stamp when it must carry one, through the transport, which keeps
// the channel's order.
func (p *participant) sendRemote(t *participant, st snapshot.Stamp, msg interface{}) error {
	var stamp *snapshot.Stamp
	if (st.Seq == 1 && (len(st.Recorded) > 0 || st.Horizon > 0)) || st.Epoch > 0 {
		stamp = &st
	}
	b, err := p.encodeMessage(t, stamp, msg)
	if err != nil {
		return err
	}
	p.sys.sendBytes(t.addr, b)
	return nil
}

// canCross checks that msg can cross to another member before it is
// counted on its channel.
func (p *participant) canCross(msg interface{}) error {
	payload := actor.UnwrapEnvelopeMessage(untag(msg))
	_, err := p.enc.name(payload)
	if err != nil {
		return fmt.Errorf("actors: %s cannot send %T to another member: %w", p.id, payload, err)
	}
	return nil
}

// remote returns the stand-in of participant id on member addr: the
// sender key its messages are queued under here, and where markers and
// departures to it go. A stand-in is made at the first word of it (its
// member's announcement, or a message of its that overtook it).
func (r *registry) remote(id snapshot.ProcessID, addr string, keys interface{ Add(uint64) uint64 }) *participant {
	r.mu.RLock()
	e := r.remotes[id]
	r.mu.RUnlock()
	if e != nil && e.addr == addr && !e.stopped.Load() {
		return e
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.remoteLocked(id, addr, keys)
}

func (r *registry) remoteLocked(id snapshot.ProcessID, addr string, keys interface{ Add(uint64) uint64 }) *participant {
	if e := r.remotes[id]; e != nil && e.addr == addr && !e.stopped.Load() {
		return e
	}
	e := &participant{id: id, addr: addr, key: mailbox.SenderKey(keys.Add(1))}
	r.remotes[id] = e
	r.byKey[e.key] = e
	r.version++
	return e
}

// joined applies a member's announcement: participants live there, and
// those that stopped.
func (r *registry) joined(addr string, live, left []snapshot.ProcessID, keys interface{ Add(uint64) uint64 }) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, id := range live {
		r.remoteLocked(id, addr, keys)
	}
	for _, id := range left {
		if e := r.remotes[id]; e != nil && e.addr == addr {
			e.stopped.Store(true)
			// Its stop frame follows on its way to the coordinator.
			r.unheard[id] = true
			r.version++
		}
	}
}

// memberLeft marks every stand-in on member addr stopped, and returns
// their ids.
func (r *registry) memberLeft(addr string) []snapshot.ProcessID {
	r.mu.Lock()
	defer r.mu.Unlock()
	var ids []snapshot.ProcessID
	for id, e := range r.remotes {
		if e.addr == addr && !e.stopped.Load() {
			e.stopped.Store(true)
			ids = append(ids, id)
		}
		if e.addr == addr {
			delete(r.unheard, id) // no stop comes from a member gone
		}
	}
	if len(ids) > 0 {
		r.version++
	}
	slices.Sort(ids)
	return ids
}

// byMember splits sets by the member of each participant's stand-in;
// those of this member's participants are left out.
func (r *registry) byMember(sets map[snapshot.ProcessID][]snapshot.ProcessID) map[string]map[snapshot.ProcessID][]snapshot.ProcessID {
	r.mu.RLock()
	defer r.mu.RUnlock()
	out := make(map[string]map[snapshot.ProcessID][]snapshot.ProcessID)
	for id, set := range sets {
		e := r.remotes[id]
		if e == nil || e.stopped.Load() {
			continue
		}
		if out[e.addr] == nil {
			out[e.addr] = make(map[snapshot.ProcessID][]snapshot.ProcessID)
		}
		out[e.addr][id] = set
	}
	return out
}

// remoteLiveLocked returns the live stand-ins' ids and members, for a
// caller that holds r.mu.
func (r *registry) remoteLiveLocked() map[snapshot.ProcessID]string {
	out := make(map[snapshot.ProcessID]string, len(r.remotes))
	for id, e := range r.remotes {
		if !e.stopped.Load() {
			out[id] = e.addr
		}
	}
	return out
}

// lookupRemote returns the live stand-in of id on member addr, or nil.
func (r *registry) lookupRemote(id snapshot.ProcessID, addr string) *participant {
	r.mu.RLock()
	defer r.mu.RUnlock()
	e := r.remotes[id]
	if e == nil || e.stopped.Load() || (addr != "" && e.addr != addr) {
		return nil
	}
	return e
}

// Channel frames (a participant's message, marker or departure) are the
// traffic between members, so they have a compact binary form rather than
// frame's msgpack: the kind byte (fMessage, fMarker or fDeparted, never
// the first byte of a msgpack map), then uvarint-prefixed From and To,
// then by kind: a marker's snapshot id (uvarint); a message's stamp kind
// (stampNone; stampFirst and the stamp in msgpack, uvarint-prefixed; or
// stampEpoch and the sender's epoch, a uvarint), its type name
// (uvarint-prefixed) and its encoding (the rest).

// The stamp kinds of a message's channel frame.
const (
	stampNone  = 0 // no stamp: the next on its channel
	stampFirst = 1 // a channel's first message's stamp, in msgpack
	stampEpoch = 2 // the epoch mode: the sender's epoch, a uvarint
)

// encodeMessage appends the channel frame of msg from p to t, encoded
// by p's encoder, to a new slice the transport may keep.
func (p *participant) encodeMessage(t *participant, st *snapshot.Stamp, msg interface{}) ([]byte, error) {
	rm, err := p.enc.one(msg)
	if err != nil {
		return nil, err
	}
	var stamp []byte
	if st != nil && st.Epoch == 0 {
		if stamp, err = msgpack.Marshal(st); err != nil {
			return nil, err
		}
	}
	b := make([]byte, 0, 1+3*binary.MaxVarintLen16+len(p.id)+len(t.id)+len(stamp)+len(rm.Type)+len(rm.Data)+2+binary.MaxVarintLen64)
	b = appendHead(b, fMessage, p.id, t.id)
	switch {
	case stamp != nil:
		b = append(b, stampFirst)
		b = appendBytes(b, stamp)
	case st != nil:
		// The epoch mode: every message carries only its epoch.
		b = append(b, stampEpoch)
		b = binary.AppendUvarint(b, uint64(st.Epoch))
	default:
		b = append(b, stampNone)
	}
	b = appendBytes(b, []byte(rm.Type))
	return append(b, rm.Data...), nil
}

func appendHead(b []byte, kind uint8, from, to snapshot.ProcessID) []byte {
	b = append(b, kind)
	b = appendBytes(b, []byte(from))
	return appendBytes(b, []byte(to))
}

func appendBytes(b, s []byte) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

// channelFrame is a decoded channel frame: a participant's message,
// marker or departure from another member.
type channelFrame struct {
	k        uint8
	from, to snapshot.ProcessID
	id       snapshot.SnapshotID // a marker's snapshot
	stamp    *snapshot.Stamp     // a first message's (stampFirst)
	epoch    snapshot.SnapshotID // a message's sender's epoch (stampEpoch)
	msg      RecordedMessage     // a message's, if hasMsg
	hasMsg   bool
}

// readChannel decodes a channel frame. Its names (the participants', the
// message type's) are taken from names when it holds them, so that the
// frames of a busy link allocate no string; names may be nil.
func readChannel(b []byte, names *interner) (channelFrame, error) {
	var c channelFrame
	if len(b) == 0 {
		return c, errShortFrame
	}
	r := frameReader{b: b[1:]}
	c.k = b[0]
	c.from = snapshot.ProcessID(names.get(r.bytes()))
	c.to = snapshot.ProcessID(names.get(r.bytes()))
	switch c.k {
	case fMarker:
		c.id = snapshot.SnapshotID(r.uvarint())
	case fMessage:
		switch r.byte1() {
		case stampNone:
		case stampFirst:
			var st snapshot.Stamp
			if r.err == nil {
				if err := msgpackbound.Unmarshal(r.bytes(), &st); err != nil {
					return c, fmt.Errorf("actors: a stamp from another member: %w", err)
				}
			}
			c.stamp = &st
		case stampEpoch:
			c.epoch = snapshot.SnapshotID(r.uvarint())
		default:
			if r.err == nil {
				return c, errors.New("actors: a message frame from another member with an unknown stamp kind")
			}
		}
		name := names.get(r.bytes())
		if r.err == nil {
			c.msg, c.hasMsg = RecordedMessage{Type: name, Data: r.b}, true
		}
	}
	return c, r.err
}

// interner holds names as strings, so that decoding one it holds
// allocates nothing. It holds at most maxNames: the names come from
// other members.
type interner struct {
	mu    sync.RWMutex
	names map[string]string
}

const maxNames = 1 << 16

// get returns b as a string, the one held if there is one. A nil
// interner holds nothing.
func (n *interner) get(b []byte) string {
	if n == nil {
		return string(b)
	}
	n.mu.RLock()
	s, ok := n.names[string(b)] // no allocation: a lookup by the bytes
	n.mu.RUnlock()
	if ok {
		return s
	}
	s = string(b)
	n.mu.Lock()
	if n.names == nil {
		n.names = make(map[string]string)
	}
	if len(n.names) < maxNames {
		n.names[s] = s
	}
	n.mu.Unlock()
	return s
}

// frameReader reads a channel frame, remembering the first error.
type frameReader struct {
	b   []byte
	err error
}

var errShortFrame = errors.New("actors: a frame from another member is cut short")

func (r *frameReader) uvarint() uint64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.err = errShortFrame
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *frameReader) bytes() []byte {
	n := r.uvarint()
	if r.err != nil || n > uint64(len(r.b)) {
		r.err = errShortFrame
		return nil
	}
	s := r.b[:n]
	r.b = r.b[n:]
	return s
}

func (r *frameReader) byte1() byte {
	if r.err != nil || len(r.b) == 0 {
		r.err = errShortFrame
		return 0
	}
	c := r.b[0]
	r.b = r.b[1:]
	return c
}
