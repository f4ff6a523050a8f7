package persistence

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/actorsnap/actorsnap/snapshot"
)

// ErrUnauthentic is wrapped by every AuthError: it is returned when a
// stored snapshot's MAC does not match its content, names a key the
// Keyring does not hold, or is missing where the Keyring requires one.
var ErrUnauthentic = errors.New("persistence: snapshot not authentic")

// AuthError reports a stored snapshot that a Keyring refuses. Such a
// snapshot is never loaded. It wraps ErrUnauthentic.
type AuthError struct {
	// ID is the snapshot's id.
	ID snapshot.SnapshotID
	// KeyID is the id of the key the snapshot's MAC names, or empty for a
	// snapshot without one.
	KeyID string
	// Reason says what is wrong.
	Reason string
}

func (e *AuthError) Error() string {
	return fmt.Sprintf("persistence: snapshot %d is not authentic: %s", e.ID, e.Reason)
}

// Unwrap returns ErrUnauthentic.
func (e *AuthError) Unwrap() error { return ErrUnauthentic }

// MinKeySize is the shortest secret a Keyring accepts, in bytes (128
// bits). 32 random bytes, the size of the MAC, are the usual choice.
const MinKeySize = 16

// maxKeyID bounds a key id, in bytes.
const maxKeyID = 64

// Key is one secret key of a Keyring.
type Key struct {
	// ID names the key in the stores, beside each snapshot it signs: 1
	// to 64 ASCII letters, digits, '.', '_' or '-'.
	ID string
	// Secret is the key itself, at least MinKeySize bytes.
	Secret []byte
}

// Keyring holds the secret keys that authenticate stored snapshots, each
// known by its id: the signing key, which every snapshot a store saves is
// signed with, and older keys, which still check the snapshots they
// signed, so that keys can rotate. A store given a Keyring (WithKeyring,
// Authenticate) keeps beside each snapshot it saves an HMAC-SHA256 of the
// snapshot's stored form and the id of the key; Load and Latest refuse,
// with an *AuthError, a snapshot whose MAC does not match or names a key
// the Keyring does not hold, and, if the Keyring requires signatures
// (RequireSigned), one without a MAC. A store without a Keyring checks
// checksums only, which catch accidents but not changes made on purpose.
//
// A Keyring never changes once made, and is safe for concurrent use. Its
// String shows the key ids, never the secrets.
type Keyring struct {
	signer  string
	keys    map[string][]byte
	require bool
}

// NewKeyring returns a Keyring of keys, the first of which signs. Ids
// must be distinct. The secrets are copied.
func NewKeyring(keys ...Key) (*Keyring, error) {
	if len(keys) == 0 {
		return nil, errors.New("persistence: keyring: no key")
	}
	k := &Keyring{signer: keys[0].ID, keys: make(map[string][]byte, len(keys))}
	for _, key := range keys {
		if err := checkKeyID(key.ID); err != nil {
			return nil, err
		}
		if len(key.Secret) < MinKeySize {
			return nil, fmt.Errorf("persistence: keyring: key %q is %d bytes, fewer than %d", key.ID, len(key.Secret), MinKeySize)
		}
		if _, dup := k.keys[key.ID]; dup {
			return nil, fmt.Errorf("persistence: keyring: key %q given twice", key.ID)
		}
		k.keys[key.ID] = slices.Clone(key.Secret)
	}
	return k, nil
}

func checkKeyID(id string) error {
	if id == "" || len(id) > maxKeyID {
		return fmt.Errorf("persistence: keyring: key id %q: want 1 to %d letters, digits, '.', '_' or '-'", id, maxKeyID)
	}
	for _, c := range id {
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '.', c == '_', c == '-':
		default:
			return fmt.Errorf("persistence: keyring: key id %q: %q is not allowed; want letters, digits, '.', '_' or '-'", id, c)
		}
	}
	return nil
}

// ParseKeyring reads a Keyring from text: keys of the form ID:SECRET, the
// secret in base64 (standard or URL alphabet, padded or not), separated by
// white space or commas; '#' starts a comment that runs to the end of its
// line. The first key signs. For example, a key file during a rotation:
//
//	# k2 signs; k1 still checks what it signed
//	k2:q3l7r5J0oQ2y8tC1mB0v4nQe9xWz6uHsKpLdFgAjYiE=
//	k1:Jm0c8Vb1Qn2Wx4Lz7Rt5Yp9Ks3Hd6Gf0Ae8Uo1Ii4Sw=
//
// Errors name the key, never show a secret.
func ParseKeyring(text string) (*Keyring, error) {
	var keys []Key
	for line := range strings.Lines(text) {
		line, _, _ = strings.Cut(line, "#")
		for _, field := range strings.FieldsFunc(line, func(r rune) bool { return r == ',' || r == ' ' || r == '\t' || r == '\n' || r == '\r' }) {
			id, secret, ok := strings.Cut(field, ":")
			if !ok {
				return nil, fmt.Errorf("persistence: keyring: key %d: want ID:BASE64-SECRET", len(keys)+1)
			}
			b, err := decodeSecret(secret)
			if err != nil {
				return nil, fmt.Errorf("persistence: keyring: key %q: the secret is not base64", id)
			}
			keys = append(keys, Key{ID: id, Secret: b})
		}
	}
	return NewKeyring(keys...)
}

func decodeSecret(s string) ([]byte, error) {
	var err error
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
		var b []byte
		if b, err = enc.DecodeString(s); err == nil {
			return b, nil
		}
	}
	return nil, err
}

// ReadKeyringFile reads a Keyring from the file at path, in the form
// ParseKeyring reads. A file that users other than its owner may read or
// write (mode bits 0077) is refused, as ssh refuses such a private key:
// its keys are no longer secret.
func ReadKeyringFile(path string) (*Keyring, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("persistence: keyring: %w", err)
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("persistence: keyring: %w", err)
	}
	if !info.Mode().IsRegular() {
		return nil, fmt.Errorf("persistence: keyring: %s is not a regular file", path)
	}
	if perm := info.Mode().Perm(); perm&0o077 != 0 {
		return nil, fmt.Errorf("persistence: keyring: %s has mode %04o: others may read it (chmod 600 %s)", path, perm, path)
	}
	const maxKeyFile = 1 << 20
	b, err := io.ReadAll(io.LimitReader(f, maxKeyFile+1))
	if err != nil {
		return nil, fmt.Errorf("persistence: keyring: %w", err)
	}
	if len(b) > maxKeyFile {
		return nil, fmt.Errorf("persistence: keyring: %s is larger than %d bytes", path, maxKeyFile)
	}
	k, err := ParseKeyring(string(b))
	if err != nil {
		return nil, fmt.Errorf("%w (in %s)", err, path)
	}
	return k, nil
}

// RequireSigned returns a copy of k that also refuses snapshots without a
// MAC. Without it, a snapshot without one loads (snapshots saved before
// the store had keys, or by a build without them), and so does one whose
// MAC was removed: only a required signature tells these apart.
func (k *Keyring) RequireSigned() *Keyring {
	c := *k
	c.require = true
	return &c
}

// Required reports whether k refuses snapshots without a MAC.
func (k *Keyring) Required() bool { return k != nil && k.require }

// Signer returns the id of the key that signs, or "" for a nil Keyring.
func (k *Keyring) Signer() string {
	if k == nil {
		return ""
	}
	return k.signer
}

// String shows the key ids, the signing key first; never the secrets.
func (k *Keyring) String() string {
	if k == nil {
		return "keyring(none)"
	}
	s := "keyring(" + strings.Join(k.ids(), ", ")
	if k.require {
		s += "; required"
	}
	return s + ")"
}

// ids returns the key ids, the signing key's first and the others sorted.
func (k *Keyring) ids() []string {
	ids := make([]string, 0, len(k.keys))
	for id := range k.keys {
		if id != k.signer {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	return append([]string{k.signer}, ids...)
}

// GoString is String, so that %#v shows no secret either.
func (k *Keyring) GoString() string { return k.String() }

// macDomain starts every MAC's input, apart from any other use of a key.
const macDomain = "actorsnap snapshot MAC 1\x00"

// MAC computes or checks the MAC of one stored snapshot: HMAC-SHA256,
// under one key of a Keyring, of a header and then of what the store
// writes to it, the snapshot's stored form as the store documents it. The
// header is macDomain, the store's layout name and the key id (each a
// byte of length and the bytes) and the snapshot id (8 bytes, big-endian),
// so that a MAC holds for one snapshot id, one key id and one store's form
// only. A MAC is an io.Writer, for one goroutine at a time.
type MAC struct {
	id    snapshot.SnapshotID
	keyID string
	h     hash.Hash
}

func newMAC(layout, keyID string, secret []byte, id snapshot.SnapshotID) *MAC {
	m := &MAC{id: id, keyID: keyID, h: hmac.New(sha256.New, secret)}
	b := make([]byte, 0, len(macDomain)+2+len(layout)+len(keyID)+8)
	b = append(b, macDomain...)
	b = append(append(b, byte(len(layout))), layout...)
	b = append(append(b, byte(len(keyID))), keyID...)
	b = binary.BigEndian.AppendUint64(b, uint64(id))
	m.h.Write(b)
	return m
}

// Sign returns the MAC that signs snapshot id, stored in the form layout
// names (a store's own name for it, such as "file"), under k's signing
// key; nil for a nil Keyring, which signs nothing.
func (k *Keyring) Sign(layout string, id snapshot.SnapshotID) *MAC {
	if k == nil {
		return nil
	}
	return newMAC(layout, k.signer, k.keys[k.signer], id)
}

// Check returns the MAC that checks snapshot id, stored in the form layout
// names with a MAC under the key keyID ("" for a snapshot stored without
// one), or an *AuthError for a key k does not hold, or for a snapshot
// without a MAC where k requires one. It returns nil and nil where there
// is nothing to check: for a nil Keyring, and for a snapshot without a
// MAC where k does not require one.
func (k *Keyring) Check(layout string, id snapshot.SnapshotID, keyID string) (*MAC, error) {
	switch {
	case k == nil:
		return nil, nil
	case keyID == "" && k.require:
		return nil, &AuthError{ID: id, Reason: fmt.Sprintf("it has no MAC, and signatures are required (key %q signs)", k.signer)}
	case keyID == "":
		return nil, nil
	}
	secret, ok := k.keys[keyID]
	if !ok {
		return nil, &AuthError{ID: id, KeyID: keyID, Reason: fmt.Sprintf("signed with key %q, which the keyring does not hold (it holds %s)", keyID, strings.Join(k.ids(), ", "))}
	}
	return newMAC(layout, keyID, secret, id), nil
}

// Write adds p to the MAC's input. It never fails.
func (m *MAC) Write(p []byte) (int, error) { return m.h.Write(p) }

// KeyID returns the id of the MAC's key.
func (m *MAC) KeyID() string { return m.keyID }

// Sum returns the MAC of what was written: what a store keeps beside the
// snapshot, with KeyID.
func (m *MAC) Sum() []byte { return m.h.Sum(nil) }

// Verify compares stored, the MAC kept beside the snapshot, with the MAC
// of what was written, in constant time, and returns an *AuthError if they
// differ.
func (m *MAC) Verify(stored []byte) error {
	if hmac.Equal(m.Sum(), stored) {
		return nil
	}
	return &AuthError{ID: m.id, KeyID: m.keyID, Reason: fmt.Sprintf("its MAC under key %q does not match its content: it was changed after it was saved, or saved with another secret under that id", m.keyID)}
}
