package testenv

import (
	"os"
	"os/exec"
	"testing"
)

// Chromium returns the path of a Chromium browser (Debian's chromium, or
// chromium-browser elsewhere) for tests that drive a real browser.
// Without one the test is skipped, or fails if ACTORSNAP_REQUIRE_CHROMIUM
// is set (CI installs Chromium and sets it).
func Chromium(t testing.TB) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser"} {
		if path, err := exec.LookPath(name); err == nil {
			return path
		}
	}
	msg := "Chromium is not installed (apt-get install chromium)"
	if os.Getenv("ACTORSNAP_REQUIRE_CHROMIUM") != "" {
		t.Fatal(msg + ", and ACTORSNAP_REQUIRE_CHROMIUM says the test must run")
	}
	t.Skip(msg)
	return ""
}
