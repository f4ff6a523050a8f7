package snapshot_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/actorsnap/actorsnap/snapshot"
)

// An abort of a snapshot of thousands names a few of what is missing and
// counts the rest, so that it reads as one line of a log; the full lists
// stay in Missing.
func TestMissingStringIsBounded(t *testing.T) {
	var m snapshot.Missing
	for i := range 1000 {
		m.Participants = append(m.Participants, snapshot.ProcessID(fmt.Sprintf("p%03d", i)))
	}
	for i := range 12 {
		m.Channels = append(m.Channels, snapshot.ChannelGap{Channel: snapshot.Channel{From: "a", To: snapshot.ProcessID(fmt.Sprintf("b%02d", i))}, Sent: 2, Received: 1, Open: true})
	}
	s := m.String()
	assert.True(t, strings.HasPrefix(s, "not recorded: p000, p001, p002, p003, p004, p005, p006, p007, p008, p009 and 990 more; channel a->b00 open: sent 2, received 1, recorded 0;"), s)
	assert.True(t, strings.HasSuffix(s, "channel a->b09 open: sent 2, received 1, recorded 0 and 2 more channels"), s)
	assert.Less(t, len(s), 700)
	few := snapshot.Missing{Participants: []snapshot.ProcessID{"a", "b"}}
	assert.Equal(t, "not recorded: a, b", few.String())
}
