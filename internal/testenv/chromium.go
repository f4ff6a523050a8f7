package testenv

import "testing"

// Chromium returns the path of a Chromium browser (Debian's chromium, or
// chromium-browser elsewhere) for tests that drive a real browser.
// Without one the test is skipped, or fails if ACTORSNAP_REQUIRE_CHROMIUM
// is set (CI installs Chromium and sets it).
func Chromium(t testing.TB) string {
	t.Helper()
	return program(t, []string{"chromium", "chromium-browser"}, "Chromium is not installed (apt-get install chromium)", "ACTORSNAP_REQUIRE_CHROMIUM")
}
