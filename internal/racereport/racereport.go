// Package racereport reads the data race reports a child process built
// with -race writes on its standard error, and tells the races of this
// module's code from those inside its dependencies. Tests that run
// cluster members as processes use it: a member of this Proto.Actor
// version races inside Proto.Actor and gRPC under -race, which the tests
// log, while a race in this module fails them.
package racereport

import (
	"slices"
	"strings"
)

// Module is the import path prefix of this module's functions.
const Module = "github.com/actorsnap/actorsnap/"

// ExitCode is the race detector's exit status (GORACE exitcode).
const ExitCode = 66

// Split returns the race reports in stderr whose racing accesses include
// one made by this module's code (ours, whole), and, for the others, the
// distinct pairs of functions that race (theirs).
func Split(stderr string) (ours, theirs []string) {
	for _, r := range strings.Split(stderr, "WARNING: DATA RACE")[1:] {
		r, _, _ = strings.Cut(r, "==================")
		if InOurCode(r) {
			ours = append(ours, r)
			continue
		}
		pair := strings.Join(AccessFrames(r), " vs ")
		if !slices.Contains(theirs, pair) {
			theirs = append(theirs, pair)
		}
	}
	return ours, theirs
}

// AccessFrames returns the functions that make the two accesses of a race
// report: the frame after each line "Read at 0x... by goroutine N:" (or
// Write, or Previous ...).
func AccessFrames(report string) []string {
	var frames []string
	lines := strings.Split(report, "\n")
	for i, l := range lines {
		l = strings.TrimSpace(l)
		lower := strings.ToLower(l)
		access := strings.Contains(l, " at 0x") && strings.HasSuffix(l, ":") &&
			(strings.Contains(lower, "read") || strings.Contains(lower, "write"))
		if access && i+1 < len(lines) {
			frames = append(frames, strings.TrimSpace(lines[i+1]))
		}
	}
	return frames
}

// InOurCode reports whether one of the two accesses of a race report is
// made by a function of this module.
func InOurCode(report string) bool {
	for _, f := range AccessFrames(report) {
		if strings.HasPrefix(f, Module) {
			return true
		}
	}
	return false
}
