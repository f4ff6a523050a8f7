package cluster_test

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/actorsnap/actorsnap/internal/devca"
)

// A closed cluster: two members with certificates of one authority, and
// a stranger process on loopback that tries to join them, greeting each
// (a Hello is the first message a member sends another): (a) without TLS,
// (b) with a certificate of another authority, trusting the cluster's
// (an authority's certificate is public). It is refused: its join fails
// with no member's Hello heard, its connections fail, and every member
// logs the handshake it refused. Nothing it sent arrives: the stranger
// registers a message type the members do not, so its Hello, had it
// arrived, would make the members log it as a member refused, naming it
// (TestMemberWithAnotherRegistryIsRefused checks that log without TLS);
// no member names it, and the bank's snapshots keep completing, each
// with all of the bank's money.
func TestStrangerIsRefused(t *testing.T) {
	files, err := devca.Generate(t.TempDir(), "127.0.0.1", "localhost")
	if err != nil {
		t.Fatal(err)
	}
	other, err := devca.New("another authority")
	if err != nil {
		t.Fatal(err)
	}
	theirs, err := other.Write(t.TempDir(), "stranger", "127.0.0.1", "localhost")
	if err != nil {
		t.Fatal(err)
	}
	spec := childSpec{Store: t.TempDir(), Accounts: 20, InFlight: 1, Interval: 50 * time.Millisecond, Timeout: 5 * time.Second, TLS: &files}
	kids, specs := startMembers(t, 2, spec, false)
	deadline := awaitReady(t, kids)
	coord := coordinator(kids)
	waitComplete(t, coord, 2, deadline)
	for _, c := range []struct {
		name string
		tls  *devca.Files
		why  string // in the members' log of the refusal
	}{
		{"plaintext", nil, "first record does not look like a TLS handshake"},
		{"other-authority", &devca.Files{CA: files.CA, Cert: theirs.Cert, Key: theirs.Key}, "certificate signed by unknown authority"},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := specs[0]
			s.Extra, s.Members, s.TLS, s.Stranger, s.JoinTimeout = true, 3, c.tls, c.tls != nil, 10*time.Second
			ports := freePorts(t, 2)
			s.Port, s.AutoPort = ports[0], ports[1]
			s.Seeds = append(slices.Clone(s.Seeds), fmt.Sprintf("127.0.0.1:%d", s.AutoPort))
			addr := fmt.Sprintf("127.0.0.1:%d", s.Port)
			refused := func(k *child) int { return strings.Count(k.output(), c.why) }
			before := make([]int, len(kids))
			for i, k := range kids {
				before[i] = refused(k)
			}
			stranger := startChild(t, "stranger", s)
			deadline := time.Now().Add(60 * time.Second)
			var l string
			for !strings.HasPrefix(l, "error") && !strings.HasPrefix(l, "ready") {
				select {
				case l = <-stranger.lines:
				case <-time.After(time.Until(deadline)):
					t.Fatal("the stranger said nothing")
				}
			}
			if !strings.HasPrefix(l, "error start") || !strings.Contains(l, "no hello from") {
				t.Fatalf("the stranger was not refused for want of the members' hellos: %s", l)
			}
			t.Logf("stranger: %s", l)
			const failed = "EndpointWriter failed to connect"
			if !waitFor(deadline, func() bool { return strings.Contains(stranger.output(), failed) }) {
				t.Fatal("the stranger's connections did not fail")
			}
			logLine(t, stranger, failed)
			for i, k := range kids {
				if !waitFor(deadline, func() bool { return refused(k) > before[i] }) {
					t.Fatalf("member %s logged no refused handshake with %q", k.name, c.why)
				}
				if strings.Contains(k.output(), "member="+addr) {
					t.Fatalf("member %s heard from the stranger %s:\n%s", k.name, addr, tail(k.output(), 20))
				}
			}
			logLine(t, kids[0], c.why)
			drainComplete(t, coord)
			last := waitComplete(t, coord, 3, deadline)
			t.Logf("3 snapshots complete and consistent after the stranger's refusal, the last %d", last)
		})
	}
}

// logLine logs the first line of what c said that holds s.
func logLine(t *testing.T, c *child, s string) {
	t.Helper()
	for _, l := range strings.Split(c.output(), "\n") {
		if strings.Contains(l, s) {
			t.Logf("%s: %s", c.name, l)
			return
		}
	}
}

// drainComplete takes the lines c said so far, failing on an
// inconsistent snapshot: the lines it says next are of what happens
// after.
func drainComplete(t *testing.T, c *child) {
	t.Helper()
	for {
		select {
		case l := <-c.lines:
			switch {
			case strings.HasPrefix(l, "error"):
				t.Fatalf("member %s: %s", c.name, l)
			case strings.HasPrefix(l, "complete"):
				if bad := badComplete(l, false); bad != "" {
					t.Fatal(bad)
				}
			}
		default:
			return
		}
	}
}

// strangerTLS is the TLS configuration of a stranger whose certificate
// (f.Cert, f.Key) is of another authority than f.CA, the cluster's, which
// it trusts: membership.LoadTLS would refuse to make it. It shows its
// certificate whatever authorities a member asks for (Go's client would
// show none of another authority).
func strangerTLS(f devca.Files) (*tls.Config, error) {
	caPEM, err := os.ReadFile(f.CA)
	if err != nil {
		return nil, err
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(caPEM)
	cert, err := tls.LoadX509KeyPair(f.Cert, f.Key)
	if err != nil {
		return nil, err
	}
	return &tls.Config{Certificates: []tls.Certificate{cert}, RootCAs: roots, ClientCAs: roots,
		ClientAuth: tls.RequireAndVerifyClientCert, MinVersion: tls.VersionTLS13,
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &cert, nil }}, nil
}
