package webview

import (
	"embed"
	"encoding/json"
	"errors"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"strings"

	"github.com/actorsnap/actorsnap/persistence"
)

// assets are the page and the libraries it uses.
//
//go:embed assets
var assets embed.FS

// Defaults of the options.
const (
	// DefaultCacheSize is how many loaded snapshots are kept.
	DefaultCacheSize = 4
	// DefaultGraphLimit is the number of participants above which the
	// graph is collapsed.
	DefaultGraphLimit = 300
)

// Option configures New.
type Option func(*config)

type config struct {
	cacheSize  int
	graphLimit int
	loopback   bool
	log        *slog.Logger
}

// WithCacheSize keeps n loaded snapshots (DefaultCacheSize when n is
// below 1). Each holds a whole snapshot in memory.
func WithCacheSize(n int) Option { return func(c *config) { c.cacheSize = n } }

// WithGraphLimit collapses the graph of a snapshot of more than n
// participants to a summary (DefaultGraphLimit when n is below 1): a
// browser lays out a few hundred nodes quickly, not ten thousand.
func WithGraphLimit(n int) Option { return func(c *config) { c.graphLimit = n } }

// WithLoopbackHosts refuses requests whose Host header is not a loopback
// name (localhost, 127.0.0.1, ::1, with any port). A server on loopback
// wants it: otherwise a web page elsewhere could point its own host name
// at 127.0.0.1 (DNS rebinding) and read the store through the browser of
// someone who visits it.
func WithLoopbackHosts() Option { return func(c *config) { c.loopback = true } }

// WithLogger logs the requests that fail for a reason other than the
// request's (a store that cannot be read); the default discards.
func WithLogger(l *slog.Logger) Option { return func(c *config) { c.log = l } }

// handler serves the page and the API over one store.
type handler struct {
	store persistence.Store
	cfg   config
	cache *cache
	mux   *http.ServeMux
}

// New returns a handler serving the web view of store. It only reads
// the store; store may be used by others meanwhile, and the handler by
// any number of goroutines.
func New(store persistence.Store, opts ...Option) http.Handler {
	cfg := config{}
	for _, o := range opts {
		o(&cfg)
	}
	if cfg.cacheSize < 1 {
		cfg.cacheSize = DefaultCacheSize
	}
	if cfg.graphLimit < 1 {
		cfg.graphLimit = DefaultGraphLimit
	}
	if cfg.log == nil {
		cfg.log = slog.New(slog.DiscardHandler)
	}
	h := &handler{store: store, cfg: cfg, cache: newCache(cfg.cacheSize), mux: http.NewServeMux()}
	page, err := fs.Sub(assets, "assets")
	if err != nil {
		panic(err) // the embedded tree always has it
	}
	h.mux.HandleFunc("GET /api/snapshots", h.list)
	h.mux.HandleFunc("GET /api/snapshots/{id}", h.snapshot)
	h.mux.HandleFunc("GET /api/snapshots/{id}/participants", h.participants)
	h.mux.HandleFunc("GET /api/snapshots/{id}/channels", h.channels)
	h.mux.HandleFunc("GET /api/snapshots/{id}/graph", h.graph)
	h.mux.HandleFunc("GET /api/snapshots/{id}/diff", h.diff)
	h.mux.HandleFunc("GET /api/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, errors.New("no such API path: "+r.URL.Path))
	})
	h.mux.Handle("GET /", http.FileServerFS(page))
	return h
}

// ServeHTTP refuses what is not a read and what comes under a host name
// that is not loopback (WithLoopbackHosts), then routes.
func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	hdr := w.Header()
	hdr.Set("X-Content-Type-Options", "nosniff")
	hdr.Set("X-Frame-Options", "DENY")
	hdr.Set("Referrer-Policy", "no-referrer")
	hdr.Set("Content-Security-Policy", "default-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:")
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		hdr.Set("Allow", "GET, HEAD")
		writeError(w, http.StatusMethodNotAllowed, errors.New("the web view is read-only: "+r.Method+" is refused"))
		return
	}
	if h.cfg.loopback && !LoopbackHost(r.Host) {
		writeError(w, http.StatusForbidden, errors.New("host "+r.Host+" is not a loopback name: this server answers only to localhost"))
		return
	}
	h.mux.ServeHTTP(w, r)
}

// LoopbackHost reports whether host (a name or an address, with or
// without a port) names this machine's loopback interface: localhost,
// 127.0.0.0/8 or ::1.
func LoopbackHost(host string) bool {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// apiError is the body of every error the API returns.
type apiError struct {
	Error   string `json:"error"`
	Damaged bool   `json:"damaged,omitempty"`
}

// writeError writes err as JSON with status code.
func writeError(w http.ResponseWriter, code int, err error) {
	writeJSON(w, code, apiError{Error: err.Error(), Damaged: code == http.StatusInternalServerError && persistence.IsDamage(err)})
}

// writeJSON writes v as JSON with status code.
func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v) // the client has gone if this fails
}

// fail writes the error of a request that could not be served: not
// found, damaged, or a store that failed (logged).
func (h *handler) fail(w http.ResponseWriter, r *http.Request, err error) {
	var bad badRequestError
	switch {
	case errors.As(err, &bad):
		writeError(w, http.StatusBadRequest, err)
	case errors.Is(err, persistence.ErrNotFound):
		writeError(w, http.StatusNotFound, err)
	case r.Context().Err() != nil:
		// The client went away; nobody reads the answer.
	default:
		if !persistence.IsDamage(err) {
			h.cfg.log.Error("webview: request failed", "path", r.URL.Path, "err", err)
		}
		writeError(w, http.StatusInternalServerError, err)
	}
}

// badRequestError is a request's own mistake: a bad id or parameter.
type badRequestError struct{ msg string }

func (e badRequestError) Error() string { return e.msg }
