// Package placement decides which cluster member hosts a participant:
// rendezvous (highest random weight) hashing of the participant's name
// over the member list. Every member computes the same answer from the
// same list, with no coordination; a member joining or leaving moves only
// the participants it gains or held (about 1/n of them), so a restore onto
// a different number of members replays most channels where they were.
package placement
