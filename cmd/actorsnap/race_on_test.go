//go:build race

package main

// raceBuild reports whether the tests run under the race detector: the
// binary they run is then built with it too.
const raceBuild = true
