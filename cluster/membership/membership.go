package membership

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unsafe"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/cluster"
	"github.com/asynkron/protoactor-go/cluster/clusterproviders/automanaged"
	"github.com/asynkron/protoactor-go/cluster/clusterproviders/etcd"
	"github.com/asynkron/protoactor-go/cluster/identitylookup/disthash"
	"github.com/asynkron/protoactor-go/eventstream"
	"github.com/asynkron/protoactor-go/remote"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/protobuf/types/known/emptypb"
)

// Provider is the cluster provider that finds the members.
type Provider uint8

const (
	// Etcd registers each member under a lease of an etcd server
	// (Config.Etcd); Proto.Actor's cluster/clusterproviders/etcd.
	Etcd Provider = iota + 1
	// Automanaged polls the members' own HTTP ports (Config.Seeds);
	// Proto.Actor's cluster/clusterproviders/automanaged.
	Automanaged
)

func (p Provider) String() string {
	switch p {
	case Etcd:
		return "etcd"
	case Automanaged:
		return "automanaged"
	}
	return "Provider(" + strconv.Itoa(int(p)) + ")"
}

// Defaults of Config.TTL: Proto.Actor's own.
const (
	DefaultEtcdTTL        = 3 * time.Second
	DefaultAutomanagedTTL = 2 * time.Second
)

// EtcdBaseKey is the etcd key prefix of the members: each member is a key
// EtcdBaseKey/ClusterName/ClusterName@ActorSystemID holding its address.
const EtcdBaseKey = "/actorsnap/members"

// Config says which cluster to join and how.
type Config struct {
	// ClusterName names the cluster: only members of the same name see
	// each other (with etcd, it is part of the key).
	ClusterName string
	// Host and Port are where this member's Proto.Actor remote listens,
	// and, as Host:port, the member's address that the others see: Host
	// must be reachable from them (not 0.0.0.0). Port 0 takes a free port;
	// Self tells which.
	Host string
	Port int
	// Advertised, if set, is the address (host:port) the others reach
	// this member at instead of Host:Port: a proxy or a NAT in front of
	// it. It is then the member's address.
	Advertised string

	Provider Provider
	// Etcd lists the etcd endpoints (host:port), for Etcd.
	Etcd []string
	// Seeds lists the automanaged HTTP ports (host:port) of every member
	// that may ever be in the cluster, for Automanaged. This member's own
	// (Host:AutomanagedPort) is added if missing.
	Seeds []string
	// AutomanagedPort is the port on which this member serves its state to
	// the others, for Automanaged. Proto.Actor listens on it on all
	// interfaces (0.0.0.0), whatever Host is, over plain HTTP, TLS or
	// not: GET /_health answers the member's id, address, ports, kinds
	// and cluster name to anyone.
	AutomanagedPort int

	// TLS, if set, closes the cluster: the member's remote speaks mutual
	// TLS with it, as server and as client, on every connection between
	// members (their messages, and Proto.Actor's gossip). It must hold
	// the member's certificate, valid for the host the others dial (Host,
	// or Advertised's host); the authority in RootCAs and ClientCAs; and
	// ClientAuth tls.RequireAndVerifyClientCert. LoadTLS makes one from
	// PEM files. A member logs each connection it refuses (the peer's
	// address and why) on its actor system's logger, at Warn. Nil means
	// plaintext: whoever reaches the port can deliver messages. The
	// provider's own connections (etcd, the automanaged port) are not
	// covered. It has no JSON form: it holds keys and functions.
	TLS *tls.Config `json:"-"`

	// TTL is how soon a member that died without leaving is dropped. With
	// Etcd it is the lease's time to live, in whole seconds (rounded up;
	// etcd raises it to its own minimum, 2 s by default), renewed every
	// third of it; zero means DefaultEtcdTTL. With Automanaged it is the
	// period of the polls, and a dead member goes at the first poll after
	// its death; zero means DefaultAutomanagedTTL.
	TTL time.Duration
}

func (cfg *Config) check() error {
	if cfg.ClusterName == "" {
		return errors.New("membership: no ClusterName")
	}
	if cfg.Host == "" {
		return errors.New("membership: no Host")
	}
	if ip := net.ParseIP(cfg.Host); ip != nil && ip.IsUnspecified() {
		return fmt.Errorf("membership: Host %s is no address the others can reach", cfg.Host)
	}
	if cfg.Port < 0 || cfg.Port > 65535 {
		return fmt.Errorf("membership: Port %d out of range", cfg.Port)
	}
	if cfg.TTL < 0 {
		return fmt.Errorf("membership: negative TTL %v", cfg.TTL)
	}
	switch cfg.Provider {
	case Etcd:
		if len(cfg.Etcd) == 0 {
			return errors.New("membership: Etcd provider without etcd endpoints")
		}
	case Automanaged:
		if cfg.AutomanagedPort <= 0 || cfg.AutomanagedPort > 65535 {
			return fmt.Errorf("membership: Automanaged provider needs AutomanagedPort in 1..65535, not %d", cfg.AutomanagedPort)
		}
	default:
		return fmt.Errorf("membership: unknown provider %v", cfg.Provider)
	}
	return cfg.checkTLS()
}

// checkTLS rejects a TLS configuration that would leave the cluster open,
// or that the other members could not verify.
func (cfg *Config) checkTLS() error {
	t := cfg.TLS
	switch {
	case t == nil:
		return nil
	case len(t.Certificates) == 0 && (t.GetCertificate == nil || t.GetClientCertificate == nil):
		return errors.New("membership: TLS without Certificates: a member shows its certificate to the others, as server and as client")
	case t.ClientAuth != tls.RequireAndVerifyClientCert:
		return fmt.Errorf("membership: TLS.ClientAuth is %v, not RequireAndVerifyClientCert: a member would admit peers without a certificate of the authority", t.ClientAuth)
	case t.RootCAs == nil || t.ClientCAs == nil:
		return errors.New("membership: TLS without both RootCAs and ClientCAs: the system's roots would admit certificates of any public authority")
	case t.InsecureSkipVerify:
		return errors.New("membership: TLS.InsecureSkipVerify: a member would connect to whoever holds a member's address")
	case len(t.Certificates) == 0:
		return nil // GetCertificate: checked when it is called
	}
	leaf := t.Certificates[0].Leaf
	if leaf == nil {
		var err error
		if leaf, err = x509.ParseCertificate(t.Certificates[0].Certificate[0]); err != nil {
			return fmt.Errorf("membership: TLS certificate: %w", err)
		}
	}
	host := cfg.Host
	if cfg.Advertised != "" {
		if h, _, err := net.SplitHostPort(cfg.Advertised); err == nil {
			host = h
		}
	}
	if err := leaf.VerifyHostname(host); err != nil {
		return fmt.Errorf("membership: the TLS certificate is not for %s, the host the other members dial: %w", host, err)
	}
	return nil
}

// LoadTLS returns the TLS configuration of a member of a closed cluster
// (Config.TLS) from PEM files: caFile holds the authority's certificates,
// which every member trusts; certFile the member's certificate, followed
// by any intermediate ones; keyFile its key. The configuration requires
// and verifies certificates of that authority both ways, with TLS 1.3.
// LoadTLS checks that the member's certificate is one: signed by the
// authority, valid now, for use as a server and as a client.
func LoadTLS(caFile, certFile, keyFile string) (*tls.Config, error) {
	caPEM, err := os.ReadFile(caFile)
	if err != nil {
		return nil, fmt.Errorf("membership: %w", err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(caPEM) {
		return nil, fmt.Errorf("membership: no PEM certificate in %s", caFile)
	}
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("membership: %w", err)
	}
	if cert.Leaf == nil { // GODEBUG x509keypairleaf=0
		if cert.Leaf, err = x509.ParseCertificate(cert.Certificate[0]); err != nil {
			return nil, fmt.Errorf("membership: %s: %w", certFile, err)
		}
	}
	chain := x509.NewCertPool()
	for _, der := range cert.Certificate[1:] {
		c, err := x509.ParseCertificate(der)
		if err != nil {
			return nil, fmt.Errorf("membership: %s: %w", certFile, err)
		}
		chain.AddCert(c)
	}
	for _, use := range []struct {
		usage x509.ExtKeyUsage
		name  string
	}{{x509.ExtKeyUsageServerAuth, "server"}, {x509.ExtKeyUsageClientAuth, "client"}} {
		opts := x509.VerifyOptions{Roots: roots, Intermediates: chain, KeyUsages: []x509.ExtKeyUsage{use.usage}}
		if _, err := cert.Leaf.Verify(opts); err != nil {
			return nil, fmt.Errorf("membership: %s is no %s certificate of the authority in %s: %w", certFile, use.name, caFile, err)
		}
	}
	return &tls.Config{
		Certificates: []tls.Certificate{cert},
		RootCAs:      roots,
		ClientCAs:    roots,
		ClientAuth:   tls.RequireAndVerifyClientCert,
		MinVersion:   tls.VersionTLS13,
	}, nil
}

// Membership is this actor system's membership of a cluster.
type Membership struct {
	cluster *cluster.Cluster
	self    string
	sub     *eventstream.Subscription

	mu       sync.Mutex
	members  []string
	changed  chan struct{} // closed and replaced on each new list
	watchers map[*watcher]struct{}
	left     bool
	joined   bool // Join saw this member in the list

	leaveOnce sync.Once
}

// watcher is one Watch: the lists not yet taken from ch.
type watcher struct {
	ch chan []string
}

// watchBuffer is how many lists a Watch channel holds; when a reader lags
// further behind, the oldest is dropped, so the newest is always there.
const watchBuffer = 16

// Join starts Proto.Actor remote on cfg.Host:cfg.Port and a cluster member
// on as, and returns once this member sees itself in the member list, or
// with ctx's error if that does not happen before ctx ends.
//
// An actor system joins at most once, and the cluster owns it from then
// on: Leave shuts it down. Proto.Actor starts a member in about a second
// whatever ctx says; the etcd servers are asked first, within ctx, so that
// an unreachable etcd is an error that leaves as untouched rather than
// Proto.Actor's panic. If Join fails later (a port taken, say, or no list
// with this member before ctx ends), it deregisters the member and shuts
// as down as far as Proto.Actor lets it: do not use as again.
func Join(ctx context.Context, as *actor.ActorSystem, cfg Config) (*Membership, error) {
	if err := cfg.check(); err != nil {
		return nil, err
	}
	var provider cluster.ClusterProvider
	switch cfg.Provider {
	case Etcd:
		ttl := cfg.TTL
		if ttl == 0 {
			ttl = DefaultEtcdTTL
		}
		if err := setEtcdTTL(&etcd.Provider{}, ttl); err != nil {
			return nil, err
		}
		if err := probeEtcd(ctx, cfg.Etcd); err != nil {
			return nil, err
		}
		provider = &lateEtcd{endpoints: cfg.Etcd, ttl: ttl}
	case Automanaged:
		ttl := cfg.TTL
		if ttl == 0 {
			ttl = DefaultAutomanagedTTL
		}
		own := net.JoinHostPort(cfg.Host, strconv.Itoa(cfg.AutomanagedPort))
		seeds := slices.Clone(cfg.Seeds)
		if !slices.Contains(seeds, own) {
			seeds = append(seeds, own)
		}
		provider = automanaged.NewWithConfig(ttl, cfg.AutomanagedPort, seeds...)
	}

	ccfg := cluster.Configure(cfg.ClusterName, provider, disthash.New(),
		remote.Configure(cfg.Host, cfg.Port, remoteOptions(as, cfg)...))
	c := cluster.New(as, ccfg)

	m := &Membership{
		cluster:  c,
		changed:  make(chan struct{}),
		watchers: map[*watcher]struct{}{},
	}
	// Subscribed before the start, so that the first list is not missed.
	m.sub = as.EventStream.Subscribe(func(evt any) {
		if t, ok := evt.(*cluster.ClusterTopology); ok {
			m.update(t.Members)
		}
	})

	if err := startMember(c); err != nil {
		m.abort()
		return nil, err
	}
	m.self = as.Address()

	for {
		m.mu.Lock()
		seen := slices.Contains(m.members, m.self)
		changed := m.changed
		m.mu.Unlock()
		if seen {
			m.mu.Lock()
			m.joined = true
			m.mu.Unlock()
			return m, nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			defer m.abort()
			return nil, fmt.Errorf("membership: %s did not see itself in the %v member list of %q (it has %v): %w",
				m.self, cfg.Provider, cfg.ClusterName, m.Members(), ctx.Err())
		}
	}
}

// startMember runs Proto.Actor's StartMember, which panics on errors.
func startMember(c *cluster.Cluster) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("membership: starting the cluster member: %v", r)
		}
	}()
	c.StartMember()
	return nil
}

// abort undoes a Join that failed, as far as Proto.Actor lets it: the
// provider's Shutdown deregisters the member and stops its goroutines, and
// the cluster's shuts down the actor system and remote. Both panic on
// parts never started.
func (m *Membership) abort() {
	m.mu.Lock()
	m.left = true
	m.mu.Unlock()
	m.cluster.ActorSystem.EventStream.Unsubscribe(m.sub)
	func() {
		defer func() { _ = recover() }()
		_ = m.cluster.Config.ClusterProvider.Shutdown(true)
	}()
	func() {
		defer func() { _ = recover() }()
		m.cluster.Shutdown(false)
	}()
}

// probeEtcd asks each etcd endpoint for its /health over HTTP, within ctx
// and at most 5 s, until one answers healthy: Proto.Actor's etcd provider
// panics when none does. Plain HTTP rather than an etcd client, because
// any gRPC use before Proto.Actor's remote starts races with the gRPC
// logger that remote sets (grpclog.SetLoggerV2 is not synchronised).
func probeEtcd(ctx context.Context, endpoints []string) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	tr := &http.Transport{Proxy: nil}
	defer tr.CloseIdleConnections()
	hc := &http.Client{Transport: tr}
	var errs []error
	for _, ep := range endpoints {
		url := ep
		if !strings.Contains(url, "://") {
			url = "http://" + url
		}
		err := func() error {
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, url+"/health", nil)
			if err != nil {
				return err
			}
			resp, err := hc.Do(req)
			if err != nil {
				return err
			}
			defer resp.Body.Close()
			var h struct{ Health string }
			if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<16)).Decode(&h); err != nil {
				return fmt.Errorf("%s/health: %s, %w", url, resp.Status, err)
			}
			if h.Health != "true" {
				return fmt.Errorf("%s/health: %s, health %q", url, resp.Status, h.Health)
			}
			return nil
		}()
		if err == nil {
			return nil
		}
		errs = append(errs, err)
	}
	return fmt.Errorf("membership: etcd %v does not answer: %w", endpoints, errors.Join(errs...))
}

// lateEtcd is Proto.Actor's etcd provider, made only when the cluster
// member starts: its etcd client uses gRPC, which must wait until
// Proto.Actor's remote has set the gRPC logger (see probeEtcd).
type lateEtcd struct {
	endpoints []string
	ttl       time.Duration
	p         *etcd.Provider
	// stop and stopped end the member's re-announcing (announce).
	stop, stopped chan struct{}
}

func (l *lateEtcd) start(c *cluster.Cluster, member bool) error {
	cfg := clientv3.Config{Endpoints: l.endpoints, DialTimeout: 5 * time.Second}
	p, err := etcd.NewWithConfig(EtcdBaseKey, cfg)
	if err != nil {
		return fmt.Errorf("etcd client: %w", err)
	}
	if err := setEtcdTTL(p, l.ttl); err != nil {
		return err
	}
	l.p = p
	if !member {
		return p.StartClient(c)
	}
	if err := p.StartMember(c); err != nil {
		return err
	}
	cli, err := clientv3.New(cfg)
	if err != nil {
		return fmt.Errorf("etcd client: %w", err)
	}
	l.stop, l.stopped = make(chan struct{}), make(chan struct{})
	go l.announce(cli, EtcdBaseKey+"/"+c.Config.Name+"/", c.ActorSystem.Address())
	return nil
}

// announce writes this member's entry again, unchanged, every TTL until
// Shutdown. Proto.Actor's etcd provider reads the members once and then
// follows changes through a watch it opens only after that read, so a
// member that registered in between is missing from its list until that
// member's entry changes: the rewrite is the change, and bounds the time
// such a member stays unseen by one TTL. The rewrite happens only if the
// entry is still the one read (same revision, same lease), so that it
// never moves the entry to a lease the provider no longer keeps alive.
func (l *lateEtcd) announce(cli *clientv3.Client, prefix, self string) {
	defer close(l.stopped)
	defer cli.Close()
	t := time.NewTicker(l.ttl)
	defer t.Stop()
	for {
		select {
		case <-l.stop:
			return
		case <-t.C:
		}
		ctx, cancel := context.WithTimeout(context.Background(), l.ttl)
		if resp, err := cli.Get(ctx, prefix, clientv3.WithPrefix()); err == nil {
			for _, kv := range resp.Kvs {
				n, err := etcd.NewNodeFromBytes(kv.Value)
				if err != nil || kv.Lease == 0 || net.JoinHostPort(n.Host, strconv.Itoa(n.Port)) != self {
					continue
				}
				key := string(kv.Key)
				_, _ = cli.Txn(ctx).
					If(clientv3.Compare(clientv3.ModRevision(key), "=", kv.ModRevision)).
					Then(clientv3.OpPut(key, string(kv.Value), clientv3.WithLease(clientv3.LeaseID(kv.Lease)))).
					Commit()
			}
		}
		cancel()
	}
}

func (l *lateEtcd) StartMember(c *cluster.Cluster) error { return l.start(c, true) }
func (l *lateEtcd) StartClient(c *cluster.Cluster) error { return l.start(c, false) }

func (l *lateEtcd) Shutdown(graceful bool) error {
	if l.stop != nil {
		close(l.stop)
		<-l.stopped
		l.stop = nil
	}
	if l.p == nil {
		return nil
	}
	return l.p.Shutdown(graceful)
}

// setEtcdTTL sets the lease TTL of Proto.Actor's etcd provider, which has
// no option for it (3 s, fixed): its unexported field keepAliveTTL, found
// by name and type so that a change of the pinned version is an error
// here, not a silent default.
func setEtcdTTL(p *etcd.Provider, ttl time.Duration) error {
	if ttl%time.Second != 0 {
		ttl = ttl.Truncate(time.Second) + time.Second
	}
	f := reflect.ValueOf(p).Elem().FieldByName("keepAliveTTL")
	if !f.IsValid() || f.Type() != reflect.TypeFor[time.Duration]() {
		return errors.New("membership: this Proto.Actor's etcd provider has no keepAliveTTL time.Duration field; the TTL cannot be set")
	}
	reflect.NewAt(f.Type(), unsafe.Pointer(f.UnsafeAddr())).Elem().Set(reflect.ValueOf(ttl))
	return nil
}

// etcdTTL reads what setEtcdTTL set.
func etcdTTL(p *etcd.Provider) time.Duration {
	f := reflect.ValueOf(p).Elem().FieldByName("keepAliveTTL")
	return reflect.NewAt(f.Type(), unsafe.Pointer(f.UnsafeAddr())).Elem().Interface().(time.Duration)
}

// update takes a new member list from Proto.Actor. It runs on the
// publisher's goroutine, under the member list's lock: it never blocks.
func (m *Membership) update(members []*cluster.Member) {
	list := make([]string, 0, len(members))
	for _, mem := range members {
		list = append(list, net.JoinHostPort(mem.Host, strconv.Itoa(int(mem.Port))))
	}
	slices.Sort(list)
	list = slices.Compact(list)

	m.mu.Lock()
	defer m.mu.Unlock()
	if m.joined && !slices.Contains(list, m.self) {
		// Joined and not left, it is a member: Proto.Actor's etcd
		// provider can lose its own entry (its lease lapsed while the
		// process was starved, or its own key's event came before its
		// watch) and never put it back, while the others list it again.
		list = append(list, m.self)
		slices.Sort(list)
	}
	if m.left || slices.Equal(list, m.members) {
		return
	}
	m.members = list
	close(m.changed)
	m.changed = make(chan struct{})
	for w := range m.watchers {
		w.push(list)
	}
}

// push queues list, dropping the oldest queued list if the buffer is full.
// Only update pushes, under Membership.mu, so the second send cannot block.
func (w *watcher) push(list []string) {
	select {
	case w.ch <- list:
		return
	default:
	}
	select {
	case <-w.ch:
	default:
	}
	w.ch <- list
}

// Self returns this member's address, host:port: the Address of the PIDs
// of its actors.
func (m *Membership) Self() string { return m.self }

// Members returns the addresses of the current members, sorted, this one
// included: once joined, a member counts itself until it leaves, even when
// Proto.Actor's etcd provider loses its own entry (docs/architecture.md).
// After Leave it returns the last list seen.
func (m *Membership) Members() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.members)
}

// Watch returns a channel that first holds the current list, then each new
// one, sorted, as Members would return it, and a function that ends the
// watch and closes the channel. A reader that lags more than 16 lists
// behind loses the oldest of them, never the newest. Leave closes the
// channel too.
func (m *Membership) Watch() (<-chan []string, func()) {
	w := &watcher{ch: make(chan []string, watchBuffer)}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.left {
		close(w.ch)
		return w.ch, func() {}
	}
	w.ch <- slices.Clone(m.members)
	m.watchers[w] = struct{}{}
	return w.ch, func() {
		m.mu.Lock()
		defer m.mu.Unlock()
		if _, ok := m.watchers[w]; ok {
			delete(m.watchers, w)
			close(w.ch)
		}
	}
}

// Leave leaves the cluster gracefully and shuts down the actor system, its
// remote and the provider (leaveCluster), in milliseconds. The others drop
// this member at once with Etcd (its key is deleted), at their next poll
// with Automanaged. Further calls do nothing.
func (m *Membership) Leave() {
	m.leaveOnce.Do(func() {
		m.mu.Lock()
		m.left = true
		for w := range m.watchers {
			delete(m.watchers, w)
			close(w.ch)
		}
		m.mu.Unlock()
		m.cluster.ActorSystem.EventStream.Unsubscribe(m.sub)
		leaveCluster(m.cluster)
	})
}

// leaveCluster takes the steps of Proto.Actor's graceful Cluster.Shutdown
// that matter here, without its waits. The cluster's gossip hears that
// this member left gracefully, the provider deregisters it (and frees
// its automanaged port), the identity lookup and the gossip stop, then
// the actor system and the remote's gRPC server. Proto.Actor's own
// graceful shutdown also sleeps 2 s for grains to move (this cluster
// places none: participants are placed by name, cluster/placement) and
// stops the remote's endpoints before its server; when a member has died
// that waits until the endpoint writer to it gives up reconnecting, about
// 10 s (9.4 to 10.0 s measured, every survivor of a death that restores
// in place among them). Messages still queued for other members are lost
// with the actor system either way; the links between members resend
// what was not acknowledged.
func leaveCluster(c *cluster.Cluster) {
	c.Gossip.SetState(cluster.GracefullyLeftKey, &emptypb.Empty{})
	_ = c.Config.ClusterProvider.Shutdown(true)
	c.IdentityLookup.Shutdown()
	c.Gossip.Shutdown()
	c.ActorSystem.Shutdown()
	c.Remote.Shutdown(false)
}

// remoteOptions returns the options of the member's remote: its
// advertised address, and its TLS.
func remoteOptions(as *actor.ActorSystem, cfg Config) []remote.ConfigOption {
	var opts []remote.ConfigOption
	if cfg.Advertised != "" {
		opts = append(opts, remote.WithAdvertisedHost(cfg.Advertised))
	}
	if cfg.TLS != nil {
		creds := credentials.NewTLS(cfg.TLS)
		// The dial options replace remote's default, grpc.WithInsecure.
		opts = append(opts,
			remote.WithServerOptions(grpc.Creds(&refusals{TransportCredentials: creds, log: as.Logger()})),
			remote.WithDialOptions(grpc.WithTransportCredentials(creds)))
	}
	return opts
}

// refusals are a member's server credentials: gRPC's, logging each
// connection refused in the TLS handshake. gRPC reports a failed
// handshake to grpclog only, which Proto.Actor's remote silences
// (remote.Start sets a discarding logger), and the connection never
// reaches Proto.Actor: without this log a member would refuse strangers
// without a word.
type refusals struct {
	credentials.TransportCredentials
	log *slog.Logger
}

// ServerHandshake implements credentials.TransportCredentials.
func (r *refusals) ServerHandshake(conn net.Conn) (net.Conn, credentials.AuthInfo, error) {
	c, info, err := r.TransportCredentials.ServerHandshake(conn)
	if err != nil {
		r.log.Warn("a connection is refused: its TLS handshake failed",
			slog.String("peer", conn.RemoteAddr().String()), slog.Any("error", err))
	}
	return c, info, err
}

// Clone implements credentials.TransportCredentials.
func (r *refusals) Clone() credentials.TransportCredentials {
	return &refusals{TransportCredentials: r.TransportCredentials.Clone(), log: r.log}
}
