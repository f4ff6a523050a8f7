package persistence

import (
	"context"
	"fmt"
	"maps"
	neturl "net/url"
	"regexp"
	"slices"
	"strings"
	"sync"
)

// Opener opens the store a URL names, with the options of OpenURL. It is
// what RegisterScheme registers.
type Opener func(ctx context.Context, url string, o OpenOptions) (Store, error)

// OpenOptions are the options of OpenURL that every store takes.
type OpenOptions struct {
	// Namespace, if set, opens that namespace of the store instead of the
	// store itself: a store of its own, with its own owner, beside the
	// store's (see CheckNamespace for the names allowed, and each store
	// for where it keeps a namespace).
	Namespace string
	// MustExist makes opening fail with ErrNoStore where the store does
	// not exist, and change nothing: commands that only read use it.
	MustExist bool
	// Keyring, if set, signs the snapshots the store saves and checks
	// those it loads (see Keyring).
	Keyring *Keyring
	// File are options for a FileStore, which other stores ignore.
	File []FileOption
}

// OpenOption sets an option of OpenURL.
type OpenOption func(*OpenOptions)

// InNamespace opens the namespace name of the store (OpenOptions.Namespace).
func InNamespace(name string) OpenOption { return func(o *OpenOptions) { o.Namespace = name } }

// MustExist makes OpenURL fail where the store does not exist, and change
// nothing (OpenOptions.MustExist).
func MustExist() OpenOption { return func(o *OpenOptions) { o.MustExist = true } }

// Authenticate makes the store sign the snapshots it saves with k and
// check those it loads against it (OpenOptions.Keyring).
func Authenticate(k *Keyring) OpenOption { return func(o *OpenOptions) { o.Keyring = k } }

// WithFileOptions passes opts to Open where the URL names a FileStore
// (OpenOptions.File); other stores ignore them.
func WithFileOptions(opts ...FileOption) OpenOption {
	return func(o *OpenOptions) { o.File = append(o.File, opts...) }
}

// schemes holds the registered openers. Like database/sql's drivers it is
// global, because which stores a program can open is a property of the
// program, set from init functions.
var schemes = struct {
	sync.RWMutex
	m map[string]Opener
}{m: map[string]Opener{}}

// RegisterScheme makes OpenURL open URLs of the given scheme (such as
// "postgres") with open, which receives the whole URL. The file scheme is
// built in. Registering a scheme twice, the file scheme, an invalid scheme
// or a nil opener panics, since it is a programming error.
func RegisterScheme(scheme string, open Opener) {
	if !validScheme(scheme) {
		panic(fmt.Sprintf("persistence: RegisterScheme: invalid scheme %q", scheme))
	}
	scheme = strings.ToLower(scheme)
	if open == nil {
		panic("persistence: RegisterScheme: nil opener for " + scheme)
	}
	if scheme == "file" {
		panic("persistence: RegisterScheme: the file scheme is built in")
	}
	schemes.Lock()
	defer schemes.Unlock()
	if _, ok := schemes.m[scheme]; ok {
		panic("persistence: RegisterScheme called twice for " + scheme)
	}
	schemes.m[scheme] = open
}

// OpenURL opens the store url names: a path or a file:// URL opens a
// FileStore (see Open), and a URL of a scheme registered with
// RegisterScheme is passed to its opener. Any other scheme, or a string
// holding "://" that is not a URL, is refused with ErrUnsupportedScheme.
func OpenURL(ctx context.Context, url string, opts ...OpenOption) (Store, error) {
	var o OpenOptions
	for _, opt := range opts {
		opt(&o)
	}
	if o.Namespace != "" {
		if err := CheckNamespace(o.Namespace); err != nil {
			return nil, err
		}
	}
	scheme, _, ok := splitScheme(url)
	if !ok || scheme == "file" {
		fopts := append([]FileOption{WithKeyring(o.Keyring)}, o.File...)
		if o.Namespace != "" {
			fopts = append(fopts, WithNamespace(o.Namespace))
		}
		if o.MustExist {
			fopts = append(fopts, WithMustExist())
		}
		s, err := Open(ctx, url, fopts...)
		if err != nil {
			return nil, err
		}
		return s, nil
	}
	schemes.RLock()
	open, found := schemes.m[scheme]
	known := slices.Sorted(maps.Keys(schemes.m))
	schemes.RUnlock()
	if !found {
		return nil, fmt.Errorf("%w: %q (known: %s)", ErrUnsupportedScheme, scheme, strings.Join(append([]string{"file"}, known...), ", "))
	}
	return open(ctx, url, o)
}

// splitScheme splits "scheme://rest". A string without "://" after a
// valid scheme is a path.
func splitScheme(s string) (scheme, rest string, ok bool) {
	scheme, rest, ok = strings.Cut(s, "://")
	if !ok || !validScheme(scheme) {
		return "", "", false
	}
	return strings.ToLower(scheme), rest, true
}

// validScheme reports whether s is a URL scheme (RFC 3986: a letter, then
// letters, digits, "+", "-" or ".").
func validScheme(s string) bool {
	if s == "" {
		return false
	}
	for i, c := range s {
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z':
		case i > 0 && (c >= '0' && c <= '9' || c == '+' || c == '-' || c == '.'):
		default:
			return false
		}
	}
	return true
}

// redactedMask replaces a password in Redact's result, as url.URL.Redacted
// does.
const redactedMask = "xxxxx"

// passwordParam matches the password or sslpassword parameter of a
// key=value connection string, whose value may be quoted (with
// backslash escapes: 'it\'s').
var passwordParam = regexp.MustCompile(`(?i)((?:^|\s)(?:ssl)?password\s*=\s*)('(?:[^'\\]|\\.)*'?|\S*)`)

// Redact returns a store's URL, path or connection string with every
// password in it replaced by "xxxxx": a URL's user:password, and any
// password= or sslpassword= parameter, of a URL or of a key=value
// connection string. Whatever prints or logs where a store is, prints
// Redact of it. A string it cannot parse is masked on a best-effort
// basis that errs on masking too much: from the first ':' of what looks
// like user information to its last '@'.
func Redact(store string) string {
	// Anything with "://" is taken for a URL, valid scheme or not.
	_, rest, isURL := strings.Cut(store, "://")
	if isURL && strings.Contains(rest, "@") {
		// Up to the query, one '@' ends the user information. A password
		// holding '@', '/', '?' or '#' unescaped makes that ambiguous
		// (postgres://u:12/3@host parses as host u, port 12): then mask
		// from the first ':' to the last '@' of the whole rest.
		head, _, _ := strings.Cut(rest, "?")
		if u, err := neturl.Parse(store); err == nil && u.User != nil && strings.Count(head, "@") == 1 {
			store = u.Redacted()
		} else if at := strings.LastIndex(rest, "@"); strings.Contains(rest[:at], ":") {
			start := len(store) - len(rest)
			colon := strings.Index(rest, ":")
			store = store[:start+colon+1] + redactedMask + store[start+at:]
		}
	}
	if !isURL {
		return passwordParam.ReplaceAllString(store, "${1}"+redactedMask)
	}
	base, query, ok := strings.Cut(store, "?")
	if !ok {
		return store
	}
	params := strings.Split(query, "&")
	for i, p := range params {
		// Keys are compared decoded, as pgx reads them: pass%77ord too.
		key, _, _ := strings.Cut(p, "=")
		if k, err := neturl.QueryUnescape(key); err == nil {
			key = k
		}
		if k := strings.ToLower(strings.TrimSpace(key)); k == "password" || k == "sslpassword" {
			params[i] = key + "=" + redactedMask
		}
	}
	return base + "?" + strings.Join(params, "&")
}
