package main

import (
	"bytes"
	"strings"
	"testing"
)

func TestRunPrintsConsistentSnapshots(t *testing.T) {
	var out bytes.Buffer
	if err := run(&out, 10, 4, 60, 3); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	if got := strings.Count(out.String(), ": CONSISTENT"); got != 4 {
		t.Fatalf("%d consistent snapshots, want 4:\n%s", got, out.String())
	}
}
