package persistence_test

import (
	"bytes"
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vmihailenco/msgpack/v5"

	"github.com/actorsnap/actorsnap/persistence"
	"github.com/actorsnap/actorsnap/persistence/storetest"
	"github.com/actorsnap/actorsnap/snapshot"
)

// encodeV1 is the encoder of format version 1 as it was written, with the
// msgpack package: stored data of that version is in users' directories,
// and must keep loading.
func encodeV1(t testing.TB, g *snapshot.Global) []byte {
	var buf bytes.Buffer
	buf.WriteString("ASNAPGLB\x00\x01")
	e := msgpack.NewEncoder(&buf)
	must := func(err error) {
		if err != nil {
			t.Fatal(err)
		}
	}
	tm := func(x time.Time) {
		must(e.EncodeInt(x.Unix()))
		must(e.EncodeUint(uint64(x.Nanosecond())))
	}
	must(e.EncodeArrayLen(8))
	must(e.EncodeUint(uint64(g.ID)))
	must(e.EncodeUint(uint64(g.Mode)))
	tm(g.Start)
	tm(g.End)
	must(e.EncodeArrayLen(len(g.Participants)))
	for _, p := range g.Participants {
		must(e.EncodeArrayLen(4))
		must(e.EncodeString(string(p.ID)))
		must(e.EncodeString(p.Kind))
		must(e.EncodeBytes(p.State))
		must(e.EncodeBool(p.Departed))
	}
	must(e.EncodeArrayLen(len(g.Channels)))
	for _, c := range g.Channels {
		must(e.EncodeArrayLen(5))
		must(e.EncodeString(string(c.Channel.From)))
		must(e.EncodeString(string(c.Channel.To)))
		must(e.EncodeUint(c.Sent))
		must(e.EncodeUint(c.Received))
		must(e.EncodeArrayLen(len(c.Messages)))
		for _, m := range c.Messages {
			rm := m.Payload.(persistence.RecordedMessage)
			must(e.EncodeArrayLen(2))
			must(e.EncodeString(rm.Type))
			must(e.EncodeBytes(rm.Data))
		}
	}
	buf.Write(make([]byte, 4))
	return persistence.FixChecksum(buf.Bytes())
}

// edgeGlobal is the snapshot in testdata/v1/edge.dat: empty and long
// names, nil and empty states and data, counters past 2^63, a channel whose
// ends are not participants.
func edgeGlobal() *snapshot.Global {
	return &snapshot.Global{
		ID: 1<<40 + 3, Mode: 1,
		Start: time.Unix(-5, 999999999).UTC(), End: time.Unix(1<<33, 1).UTC(),
		Participants: []snapshot.Participant{
			{ID: "", Kind: "", State: []byte{}},
			{ID: "a", Kind: strings.Repeat("k", 40), State: bytes.Repeat([]byte{0xab}, 300)},
			{ID: snapshot.ProcessID(strings.Repeat("b", 300)), Kind: "k", Departed: true},
		},
		Channels: []snapshot.ChannelState{
			{Channel: snapshot.Channel{From: "", To: "a"}, Sent: 1<<63 + 2, Received: 1 << 63, Messages: []snapshot.Message{
				{Seq: 1<<63 + 1, Payload: persistence.RecordedMessage{Type: "t"}},
				{Seq: 1<<63 + 2, Payload: persistence.RecordedMessage{Type: "", Data: []byte{}}},
			}},
			{Channel: snapshot.Channel{From: "zz", To: "zz2"}},
		},
	}
}

// TestDecodeVersion1 decodes bytes written by the version-1 encoder of an
// earlier build (testdata/v1, kept as written) and by encodeV1.
func TestDecodeVersion1(t *testing.T) {
	readFixture(t, "testdata/v1/edge.dat", 1, encodeV1(t, edgeGlobal()))
	for _, g := range []*snapshot.Global{
		edgeGlobal(),
		{ID: 1},
		storetest.NewGlobal(2, storetest.Small),
		storetest.NewGlobal(3, storetest.Shape{Participants: 1000, StateSize: 300, Channels: 3000, InFlight: 2, MessageSize: 300}),
	} {
		requireDecodes(t, encodeV1(t, g), g)
	}
}

// TestFileStoreVersions opens store directories written by this build
// and earlier ones, in format versions 1 to 3 (testdata/vN/store, kept as
// written): their snapshot loads, and lives alongside those this build
// writes.
func TestFileStoreVersions(t *testing.T) {
	for _, tc := range []struct {
		version string
		shape   storetest.Shape
	}{
		{"v1", storetest.Small},
		{"v2", storetest.Small},
		{"v3", storetest.WithWaits},
	} {
		t.Run(tc.version, func(t *testing.T) { testFileStoreFixture(t, filepath.Join("testdata", tc.version, "store"), tc.shape) })
	}
}

func testFileStoreFixture(t *testing.T, fixture string, shape storetest.Shape) {
	ctx := context.Background()
	dir := t.TempDir()
	require.NoError(t, os.CopyFS(dir, os.DirFS(fixture)))
	// os.CopyFS makes files read-only; a store deletes them.
	require.NoError(t, filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		return os.Chmod(path, 0o755)
	}))
	s := openFile(t, dir)
	g, err := s.Load(ctx, 7)
	require.NoError(t, err)
	require.NoError(t, storetest.Equal(storetest.NewGlobal(7, shape), g))

	require.NoError(t, s.Save(ctx, storetest.NewGlobal(8, shape)))
	assert.Equal(t, []snapshot.SnapshotID{7, 8}, ids(t, s))
	latest, err := s.Latest(ctx)
	require.NoError(t, err)
	assert.Equal(t, snapshot.SnapshotID(8), latest.ID)
	require.NoError(t, s.Retain(ctx, 2))
	assert.Equal(t, []snapshot.SnapshotID{7, 8}, ids(t, s))
	require.NoError(t, s.Retain(ctx, 1))
	assert.Equal(t, []snapshot.SnapshotID{8}, ids(t, s))
}
