// Package tcpproxy is a loopback TCP proxy that cuts every connection
// through it when told, as a network that drops connections does. The
// tests of the links between cluster members put one in front of a
// member's remote port, and the member advertises the proxy's address.
package tcpproxy

import (
	"io"
	"math/rand/v2"
	"net"
	"sync"
	"time"
)

// Proxy forwards each connection it accepts to one address.
type Proxy struct {
	ln    net.Listener
	to    string
	mu    sync.Mutex
	conns []net.Conn
	cuts  int
	wg    sync.WaitGroup
}

// Listen starts a proxy on a free loopback port that forwards to to.
func Listen(to string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &Proxy{ln: ln, to: to}
	p.wg.Add(1)
	go p.serve()
	return p, nil
}

// Addr returns the proxy's address, host:port.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Port returns the proxy's port.
func (p *Proxy) Port() int { return p.ln.Addr().(*net.TCPAddr).Port }

// SetTarget changes where new connections go (a member that starts after
// its proxy, on a port it learns late).
func (p *Proxy) SetTarget(to string) {
	p.mu.Lock()
	p.to = to
	p.mu.Unlock()
}

func (p *Proxy) serve() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		to := p.to
		p.mu.Unlock()
		d, err := net.Dial("tcp", to)
		if err != nil {
			c.Close()
			continue
		}
		p.mu.Lock()
		p.conns = append(p.conns, c, d)
		p.mu.Unlock()
		go func() { _, _ = io.Copy(d, c); d.Close() }()
		go func() { _, _ = io.Copy(c, d); c.Close() }()
	}
}

// Cut closes every connection through the proxy; new ones are accepted
// as before.
func (p *Proxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		c.Close()
	}
	if len(p.conns) > 0 {
		p.cuts++
	}
	p.conns = nil
}

// Cuts returns how many cuts closed at least one connection.
func (p *Proxy) Cuts() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cuts
}

// Close stops the proxy and closes its connections.
func (p *Proxy) Close() {
	p.ln.Close()
	p.wg.Wait()
	p.Cut()
}

// CutAtRandom calls cut at moments rng picks, each min to min+spread
// after the last, until the returned stop is called (stop waits for the
// cutting to end). Tests cut connections with it at seeded moments.
func CutAtRandom(rng *rand.Rand, min, spread time.Duration, cut func()) (stop func()) {
	done := make(chan struct{})
	ended := make(chan struct{})
	go func() {
		defer close(ended)
		for {
			t := time.NewTimer(min + time.Duration(rng.Int64N(int64(spread)+1)))
			select {
			case <-done:
				t.Stop()
				return
			case <-t.C:
				cut()
			}
		}
	}()
	return func() {
		close(done)
		<-ended
	}
}
