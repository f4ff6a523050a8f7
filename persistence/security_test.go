package persistence_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"hash/crc32"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/actorsnap/actorsnap/persistence"
	"github.com/actorsnap/actorsnap/persistence/storetest"
	"github.com/actorsnap/actorsnap/snapshot"
)

// umask returns the process's umask, read from /proc (reading it with
// umask(2) would change it, for a moment, for every test running).
func umask(t *testing.T) fs.FileMode {
	t.Helper()
	b, err := os.ReadFile("/proc/self/status")
	require.NoError(t, err, "the umask is read from Linux's /proc")
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, "Umask:"); ok {
			n, err := strconv.ParseUint(strings.TrimSpace(v), 8, 32)
			require.NoError(t, err)
			return fs.FileMode(n)
		}
	}
	t.Fatal("/proc/self/status shows no umask")
	return 0
}

func requireMode(t *testing.T, path string, want fs.FileMode) {
	t.Helper()
	info, err := os.Stat(path)
	require.NoError(t, err)
	assert.Equal(t, want.String(), info.Mode().Perm().String(), "mode of %s", path)
}

// TestPrivateByDefault checks item 1 of the store's security: a file
// store, its directories 0700 and its files 0600, so that no other local
// user reads a snapshot; WithPermissions widens it to read for others,
// and nothing beyond.
func TestPrivateByDefault(t *testing.T) {
	ctx := context.Background()
	mask := umask(t)
	for _, tc := range []struct {
		opts            []persistence.FileOption
		files, dirsWant fs.FileMode
	}{
		{nil, 0o600, 0o700},
		{[]persistence.FileOption{persistence.WithPermissions(0o640)}, 0o640, 0o750},
		{[]persistence.FileOption{persistence.WithPermissions(0o644)}, 0o644, 0o755},
	} {
		t.Run(tc.files.String(), func(t *testing.T) {
			parent := filepath.Join(t.TempDir(), "parent")
			root := filepath.Join(parent, "snaps")
			opts := append([]persistence.FileOption{persistence.WithKeyring(testKeys(t, "k1"))}, tc.opts...)
			s := openFile(t, root, append(opts, persistence.WithNamespace("ns"))...)
			lease, err := s.Claim(ctx, "sys", persistence.ClaimNew)
			require.NoError(t, err)
			require.NoError(t, s.Save(ctx, storetest.NewGlobal(1, storetest.Small)))
			require.NoError(t, lease.Release(ctx))
			files, dirs := tc.files&^mask, tc.dirsWant&^mask
			ns := filepath.Join(root, "namespaces", "ns")
			snap := filepath.Join(ns, snapName(1))
			for _, d := range []string{parent, root, filepath.Join(root, "namespaces"), ns, snap} {
				requireMode(t, d, dirs)
			}
			for _, f := range []string{"global.dat", "MANIFEST", "MAC"} {
				requireMode(t, filepath.Join(snap, f), files)
			}
			requireMode(t, filepath.Join(ns, "OWNER"), files)
		})
	}
	for _, perm := range []fs.FileMode{0o400, 0o660, 0o606, 0o700, 0o1600} {
		_, err := persistence.Open(ctx, t.TempDir(), persistence.WithPermissions(perm))
		require.ErrorContains(t, err, "at most 0644", "permissions %v", perm)
	}
}

// TestRefusesDirectoryWritableByOthers checks that a file store does not
// write where users other than its owner may (they could replace its
// snapshots) unless WithWritableByOthers says so, and still reads there.
func TestRefusesDirectoryWritableByOthers(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	s := openFile(t, root)
	require.NoError(t, s.Save(ctx, storetest.NewGlobal(1, storetest.Small)))

	for _, mode := range []fs.FileMode{0o777, 0o770, 0o702} {
		require.NoError(t, os.Chmod(root, mode))
		_, err := persistence.Open(ctx, root)
		require.ErrorIs(t, err, persistence.ErrWritableByOthers, "mode %v", mode)
		assert.ErrorContains(t, err, root)
		require.ErrorIs(t, s.Save(ctx, storetest.NewGlobal(2, storetest.Small)), persistence.ErrWritableByOthers)
		require.ErrorIs(t, s.Delete(ctx, 1), persistence.ErrWritableByOthers)
		require.ErrorIs(t, s.Retain(ctx, 1), persistence.ErrWritableByOthers)
		_, err = s.Claim(ctx, "sys", persistence.ClaimRestore)
		require.ErrorIs(t, err, persistence.ErrWritableByOthers)

		ro := openFile(t, root, persistence.WithMustExist())
		_, err = ro.Load(ctx, 1)
		require.NoError(t, err, "reading is not refused")

		shared := openFile(t, root, persistence.WithWritableByOthers())
		require.NoError(t, shared.Save(ctx, storetest.NewGlobal(snapshot.SnapshotID(mode), storetest.Small)))
	}

	// A namespace's store is refused where its root is writable by others.
	require.NoError(t, os.Chmod(root, 0o700))
	openFile(t, root, persistence.WithNamespace("ns"))
	require.NoError(t, os.Chmod(root, 0o777))
	_, err := persistence.Open(ctx, root, persistence.WithNamespace("ns"))
	require.ErrorIs(t, err, persistence.ErrWritableByOthers)
	require.NoError(t, os.Chmod(root, 0o700))
}

func TestRedact(t *testing.T) {
	const pw = "s3cretpw"
	for _, tc := range []struct{ in, want string }{
		{"postgres://alice:s3cretpw@127.0.0.1:1/x", "postgres://alice:xxxxx@127.0.0.1:1/x"},
		{"postgresql://alice:s3cretpw@db/x?sslmode=verify-full&schema=s", "postgresql://alice:xxxxx@db/x?sslmode=verify-full&schema=s"},
		{"postgres://alice:s3cretpw@h1:5432,h2:5433/db", "postgres://alice:xxxxx@h1:5432,h2:5433/db"},
		{"postgres://h/db?password=s3cretpw&schema=s", "postgres://h/db?password=xxxxx&schema=s"},
		{"postgres://h/db?sslpassword=s3cretpw", "postgres://h/db?sslpassword=xxxxx"},
		{"postgres://h/db?pass%77ord=s3cretpw", "postgres://h/db?password=xxxxx"},
		// Unescaped '@', '/' and ':' in a password: masked to the last '@'.
		{"postgres://alice:s3c@ret/pw@h/db", "postgres://alice:xxxxx@h/db"},
		{"postgres://alice:12/s3cretpw@h/db", "postgres://alice:xxxxx@h/db"},
		{"postgres://alice:s3cretpw@[::1/db", "postgres://alice:xxxxx@[::1/db"},
		{"host=db user=alice password=s3cretpw dbname=x", "host=db user=alice password=xxxxx dbname=x"},
		{"host=db password='s3cret pw\\' x' dbname=x", "host=db password=xxxxx dbname=x"},
		{"host=db PASSWORD = s3cretpw", "host=db PASSWORD = xxxxx"},
		{"postgres://alice@db/x", "postgres://alice@db/x"},
		{"./snaps", "./snaps"},
		{"file:///var/lib/snaps", "file:///var/lib/snaps"},
	} {
		got := persistence.Redact(tc.in)
		assert.Equal(t, tc.want, got, "Redact(%q)", tc.in)
		assert.NotContains(t, got, pw)
	}
}

// testKeys returns a keyring of fresh keys with the ids given, the first
// signing.
func testKeys(t testing.TB, ids ...string) *persistence.Keyring {
	t.Helper()
	var keys []persistence.Key
	for _, id := range ids {
		secret := make([]byte, 32)
		_, _ = rand.Read(secret)
		keys = append(keys, persistence.Key{ID: id, Secret: secret})
	}
	k, err := persistence.NewKeyring(keys...)
	require.NoError(t, err)
	return k
}

func TestKeyring(t *testing.T) {
	secret := base64.StdEncoding.EncodeToString(bytes.Repeat([]byte("S"), 32))
	raw := base64.RawURLEncoding.EncodeToString(bytes.Repeat([]byte("R"), 16))
	k, err := persistence.ParseKeyring("# k2 signs\nk2:" + secret + "\n  k1:" + raw + " # old\n")
	require.NoError(t, err)
	assert.Equal(t, "k2", k.Signer())
	assert.False(t, k.Required())
	assert.True(t, k.RequireSigned().Required())
	assert.False(t, k.Required(), "RequireSigned copies")
	k, err = persistence.ParseKeyring("k2:" + secret + ",k1:" + raw)
	require.NoError(t, err)
	assert.Equal(t, "keyring(k2, k1)", k.String())

	// Nothing shows a secret: not fmt, not slog's handlers.
	var logs bytes.Buffer
	slog.New(slog.NewJSONHandler(&logs, nil)).Info("keys", "keyring", k)
	slog.New(slog.NewTextHandler(&logs, nil)).Info("keys", "keyring", k)
	for _, s := range []string{fmt.Sprint(k), fmt.Sprintf("%+v", k), fmt.Sprintf("%#v", k), logs.String()} {
		assert.NotContains(t, s, secret)
		assert.NotContains(t, s, "SSSS")
		assert.NotContains(t, s, raw)
	}

	for text, want := range map[string]string{
		"":                           "no key",
		"k1":                         "want ID:BASE64",
		"k1:" + raw + " k1:" + raw:   `key "k1" given twice`,
		"k1:c2hvcnQ=":                `key "k1" is 5 bytes, fewer than 16`,
		"k/1:" + raw:                 `'/' is not allowed`,
		"k1:" + secret[:20] + "!!!!": `key "k1": the secret is not base64`,
	} {
		_, err := persistence.ParseKeyring(text)
		require.ErrorContains(t, err, want, "%q", text)
		assert.NotContains(t, err.Error(), secret[:20])
	}

	dir := t.TempDir()
	path := filepath.Join(dir, "keys")
	require.NoError(t, os.WriteFile(path, []byte("k1:"+secret+"\n"), 0o600))
	k, err = persistence.ReadKeyringFile(path)
	require.NoError(t, err)
	assert.Equal(t, "k1", k.Signer())
	require.NoError(t, os.Chmod(path, 0o640))
	_, err = persistence.ReadKeyringFile(path)
	require.ErrorContains(t, err, "others may read it")
}

// forge rewrites snapshot id in the file store at root as f changes it,
// recomputing every checksum, as someone who can write the store would:
// the data file is encoded anew and the manifest lists its new size and
// CRC-32C, beside the MAC file as it was.
func forge(t *testing.T, root string, id snapshot.SnapshotID, f func(g *snapshot.Global)) {
	t.Helper()
	dir := filepath.Join(root, snapName(id))
	data, err := os.ReadFile(filepath.Join(dir, persistence.DataName))
	require.NoError(t, err)
	g, err := persistence.DecodeGlobal(data)
	require.NoError(t, err)
	f(g)
	data, err = persistence.EncodeGlobal(g)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, persistence.DataName), data, 0o600))
	man, err := os.ReadFile(filepath.Join(dir, persistence.ManifestName))
	require.NoError(t, err)
	m, err := persistence.DecodeManifest(man)
	require.NoError(t, err)
	for i := range m.Files {
		if m.Files[i].Name == persistence.DataName {
			m.Files[i].Size, m.Files[i].CRC = int64(len(data)), crc32.Checksum(data, crc32.MakeTable(crc32.Castagnoli))
		}
	}
	man, err = persistence.EncodeManifest(m)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, persistence.ManifestName), man, 0o600))
}

// TestTamperedSnapshotRefused is item 4 of the store's security: a
// snapshot changed with every checksum recomputed (a message removed and
// its channel's count adjusted) passes every checksum and Verify, so a
// store without a key loads it: checksums catch accidents, not changes
// made on purpose. With the key it was signed with, the store refuses it,
// naming the snapshot and the key.
func TestTamperedSnapshotRefused(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	keys := testKeys(t, "k1")
	s := openFile(t, root, persistence.WithKeyring(keys))
	want := storetest.NewGlobal(5, storetest.Small)
	require.NoError(t, s.Save(ctx, storetest.NewGlobal(4, storetest.Small)))
	require.NoError(t, s.Save(ctx, want))
	require.NoError(t, s.Save(ctx, storetest.NewGlobal(6, storetest.Small)))
	g, err := s.Load(ctx, 5)
	require.NoError(t, err)
	require.NoError(t, storetest.Equal(want, g))

	forge(t, root, 5, func(g *snapshot.Global) { storetest.DropMessage(g) })

	plain := openFile(t, root)
	g, err = plain.Load(ctx, 5)
	require.NoError(t, err, "without a key the forgery loads")
	assert.Equal(t, want.TotalInFlight()-1, g.TotalInFlight())

	_, err = s.Load(ctx, 5)
	storetest.RequireUnauthentic(t, err, 5, "k1")
	_, err = openFile(t, root, persistence.WithKeyring(keys), persistence.WithMustExist()).Load(ctx, 5)
	storetest.RequireUnauthentic(t, err, 5, "k1")
	require.NoError(t, s.Retain(ctx, 2))
	assert.Equal(t, []snapshot.SnapshotID{4, 5, 6}, ids(t, s), "Retain neither counts nor deletes the forgery")
	require.NoError(t, s.Delete(ctx, 6))
	_, err = s.Latest(ctx)
	storetest.RequireUnauthentic(t, err, 5, "k1")
	assert.True(t, persistence.IsDamage(err))
}

// TestKeysRotateAndSignaturesRequired checks what a keyring accepts: a
// snapshot signed with an older key it still holds, not one signed with a
// key it does not hold, not a MAC moved from another snapshot, and a
// snapshot without a MAC (saved before the store had keys, or stripped of
// its MAC) only where signatures are not required.
func TestKeysRotateAndSignaturesRequired(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	k1secret := bytes.Repeat([]byte{1}, 32)
	k1, err := persistence.NewKeyring(persistence.Key{ID: "k1", Secret: k1secret})
	require.NoError(t, err)
	unsigned := storetest.NewGlobal(1, storetest.Small)
	require.NoError(t, openFile(t, root).Save(ctx, unsigned))
	require.NoError(t, openFile(t, root, persistence.WithKeyring(k1)).Save(ctx, storetest.NewGlobal(2, storetest.Small)))
	require.NoError(t, openFile(t, root, persistence.WithKeyring(k1)).Save(ctx, storetest.NewGlobal(3, storetest.Small)))

	// Rotation: k2 signs, k1 still checks.
	k21, err := persistence.NewKeyring(persistence.Key{ID: "k2", Secret: bytes.Repeat([]byte{2}, 32)}, persistence.Key{ID: "k1", Secret: k1secret})
	require.NoError(t, err)
	s := openFile(t, root, persistence.WithKeyring(k21))
	require.NoError(t, s.Save(ctx, storetest.NewGlobal(4, storetest.Small)))
	for id := snapshot.SnapshotID(1); id <= 4; id++ {
		_, err := s.Load(ctx, id)
		require.NoError(t, err, "snapshot %d", id)
	}
	mac, err := os.ReadFile(filepath.Join(root, snapName(4), "MAC"))
	require.NoError(t, err)
	assert.Contains(t, string(mac), "k2", "the MAC file names the signing key")

	// A keyring without k1 refuses what k1 signed, naming the key.
	k2only, err := persistence.NewKeyring(persistence.Key{ID: "k2", Secret: bytes.Repeat([]byte{2}, 32)})
	require.NoError(t, err)
	_, err = openFile(t, root, persistence.WithKeyring(k2only)).Load(ctx, 2)
	storetest.RequireUnauthentic(t, err, 2, "k1")
	assert.ErrorContains(t, err, "does not hold")
	// So does one with another secret under the id k1.
	_, err = openFile(t, root, persistence.WithKeyring(testKeys(t, "k1"))).Load(ctx, 2)
	storetest.RequireUnauthentic(t, err, 2, "k1")

	// A MAC moved from snapshot 3 to 2, with the manifest to match.
	copyMAC(t, root, 3, 2)
	_, err = s.Load(ctx, 2)
	storetest.RequireUnauthentic(t, err, 2, "k1")

	// Required: the snapshot saved without a key is refused, and so is
	// one whose MAC was removed from its manifest; accepted otherwise.
	stripMAC(t, root, 3)
	for _, id := range []snapshot.SnapshotID{1, 3} {
		_, err := s.Load(ctx, id)
		require.NoError(t, err, "snapshot %d has no MAC, and none is required", id)
		_, err = openFile(t, root, persistence.WithKeyring(k21.RequireSigned())).Load(ctx, id)
		storetest.RequireUnauthentic(t, err, id, "")
		assert.ErrorContains(t, err, `signatures are required (key "k2" signs)`)
	}
}

// copyMAC puts snapshot from's MAC file into snapshot to's directory, and
// to's manifest to match.
func copyMAC(t *testing.T, root string, from, to snapshot.SnapshotID) {
	t.Helper()
	mac, err := os.ReadFile(filepath.Join(root, snapName(from), "MAC"))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(root, snapName(to), "MAC"), mac, 0o600))
	rewriteManifest(t, root, to, func(m *persistence.Manifest) {
		for i := range m.Files {
			if m.Files[i].Name == "MAC" {
				m.Files[i].Size, m.Files[i].CRC = int64(len(mac)), crc32.Checksum(mac, crc32.MakeTable(crc32.Castagnoli))
			}
		}
	})
}

// stripMAC removes snapshot id's MAC from its manifest.
func stripMAC(t *testing.T, root string, id snapshot.SnapshotID) {
	t.Helper()
	rewriteManifest(t, root, id, func(m *persistence.Manifest) {
		m.Files = m.Files[:1]
		require.Equal(t, persistence.DataName, m.Files[0].Name)
	})
}

func rewriteManifest(t *testing.T, root string, id snapshot.SnapshotID, f func(m *persistence.Manifest)) {
	t.Helper()
	path := filepath.Join(root, snapName(id), persistence.ManifestName)
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	m, err := persistence.DecodeManifest(b)
	require.NoError(t, err)
	f(&m)
	b, err = persistence.EncodeManifest(m)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(path, b, 0o600))
}

// TestOldFormatsUnsigned opens the stores of format versions 1 to 3, kept
// as earlier builds wrote them, with a keyring: their unsigned snapshot
// loads unless signatures are required.
func TestOldFormatsUnsigned(t *testing.T) {
	ctx := context.Background()
	keys := testKeys(t, "k1")
	for _, tc := range []struct {
		version string
		shape   storetest.Shape
	}{{"v1", storetest.Small}, {"v2", storetest.Small}, {"v3", storetest.WithWaits}} {
		t.Run(tc.version, func(t *testing.T) {
			s := openFile(t, filepath.Join("testdata", tc.version, "store"), persistence.WithKeyring(keys), persistence.WithMustExist())
			g, err := s.Load(ctx, 7)
			require.NoError(t, err)
			require.NoError(t, storetest.Equal(storetest.NewGlobal(7, tc.shape), g))
			s = openFile(t, filepath.Join("testdata", tc.version, "store"), persistence.WithKeyring(keys.RequireSigned()), persistence.WithMustExist())
			_, err = s.Load(ctx, 7)
			storetest.RequireUnauthentic(t, err, 7, "")
		})
	}
}

func TestSignedFileStoreConformance(t *testing.T) {
	keys := testKeys(t, "k1").RequireSigned()
	storetest.Run(t, func(t *testing.T) persistence.Store {
		s, err := persistence.Open(context.Background(), t.TempDir(), persistence.WithKeyring(keys))
		if err != nil {
			t.Fatal(err)
		}
		return s
	})
}

// TestSignedSaveErrorInjection fails each operation of a signed save in
// turn: the save fails, leaves nothing, and then succeeds.
func TestSignedSaveErrorInjection(t *testing.T) {
	ctx := context.Background()
	keys := testKeys(t, "k1").RequireSigned()
	count := persistence.NewErrorFS(persistence.NewMemFS(), persistence.Fault{})
	s := openFile(t, storeDir, persistence.WithFS(count), persistence.WithKeyring(keys))
	count.SetFault(persistence.Fault{})
	require.NoError(t, s.Save(ctx, storetest.NewGlobal(1, storetest.Small)))
	total := count.Count(persistence.OpAny)
	for n := 1; n <= total; n++ {
		mem := persistence.NewMemFS()
		efs := persistence.NewErrorFS(mem, persistence.Fault{})
		s := openFile(t, storeDir, persistence.WithFS(efs), persistence.WithKeyring(keys))
		efs.SetFault(persistence.Fault{Op: persistence.OpAny, N: n})
		err := s.Save(ctx, storetest.NewGlobal(1, storetest.Small))
		require.True(t, efs.Injected())
		require.ErrorIs(t, err, persistence.ErrInjected, "op %d", n)
		requireTidy(t, mem)
		efs.SetFault(persistence.Fault{})
		require.NoError(t, s.Save(ctx, storetest.NewGlobal(1, storetest.Small)))
		g, err := s.Load(ctx, 1)
		require.NoError(t, err)
		require.NoError(t, storetest.Equal(storetest.NewGlobal(1, storetest.Small), g))
	}
}
