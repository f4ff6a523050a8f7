package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vmihailenco/msgpack/v5"

	"github.com/actorsnap/actorsnap/internal/testenv"
	"github.com/actorsnap/actorsnap/persistence"
	"github.com/actorsnap/actorsnap/snapshot"
)

// actorsnapEnv runs the binary to completion with env added to its
// environment.
func actorsnapEnv(t *testing.T, env []string, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = append(os.Environ(), env...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err = cmd.Run()
	return out.String(), errb.String(), err
}

// TestNoPasswordInOutput runs commands on stores whose URL holds a known
// password, failing in several ways, and finds it in none of their output.
func TestNoPasswordInOutput(t *testing.T) {
	const pw = "s3cretpw"
	dead := []string{
		"postgres://alice:" + pw + "@127.0.0.1:1/x?connect_timeout=5",
		"postgresql://alice:" + pw + "@127.0.0.1:1/x?sslmode=disable",
		"postgres://alice@127.0.0.1:1/x?password=" + pw,
		"postgres://alice:" + pw + "@127.0.0.1:1/x?sslmode=bogus",
		"postgres://alice:s3c@" + pw + "@127.0.0.1:1/x",
		"post gres://alice:" + pw + "@127.0.0.1:1/x",
		// Not a URL, so a directory's name: shown redacted all the same.
		"host=127.0.0.1 port=1 user=alice password=" + pw,
	}
	var runs [][]string
	for _, store := range dead {
		runs = append(runs,
			[]string{"ls", "--store", store},
			[]string{"verify", "latest", "--store", store},
			[]string{"restore", "latest", "--store", store, "--duration", "100ms"},
		)
		if strings.Contains(store, "://") {
			runs = append(runs, []string{"run", "bank", "--store", store, "--duration", "100ms"})
		}
	}
	if u := os.Getenv("ACTORSNAP_TEST_POSTGRES"); u != "" {
		// A live server that trusts its clients ignores the password, and
		// a store that holds snapshots refuses a new system: the refusal
		// names the store.
		_, store := testenv.PostgresStore(t, fmt.Sprintf("test_pw_%d", time.Now().UnixNano()))
		v, err := url.Parse(store)
		require.NoError(t, err)
		v.User = url.UserPassword(v.User.Username(), pw)
		store = v.String()
		_, _, err = actorsnap(t, "run", "bank", "--store", store, "--actors", "10", "--interval", "50ms", "--duration", "300ms")
		require.NoError(t, err)
		runs = append(runs,
			[]string{"run", "bank", "--store", store, "--members", "2", "--duration", "100ms"},
			[]string{"run", "bank", "--store", store, "--duration", "100ms"},
			[]string{"verify", "9999", "--store", store},
		)
	}
	for _, args := range runs {
		out, stderr, err := actorsnap(t, args...)
		require.Error(t, err, "%v", args)
		assert.NotContains(t, out+stderr, pw, "%v", args)
		assert.Contains(t, stderr, "actorsnap: ", "%v", args)
	}
}

// writeKeys writes a key file holding keys and returns its path.
func writeKeys(t *testing.T, keys string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "keys")
	require.NoError(t, os.WriteFile(path, []byte(keys), 0o600))
	return path
}

// forgeDroppingMessage rewrites a snapshot of the file store dir that
// has messages in flight, removing one and adjusting its channel's sent
// count, and recomputes the data file's checksum and its entry in the
// manifest: every checksum passes. It returns the snapshot's id.
func forgeDroppingMessage(t *testing.T, dir string) snapshot.SnapshotID {
	t.Helper()
	for _, id := range storedIDs(t, dir) {
		snap := filepath.Join(dir, fmt.Sprintf("snap-%020d", id))
		data, err := os.ReadFile(filepath.Join(snap, "global.dat"))
		require.NoError(t, err)
		g, err := persistence.DecodeGlobal(data)
		require.NoError(t, err)
		c := -1
		for i := range g.Channels {
			if len(g.Channels[i].Messages) > 0 {
				c = i
				break
			}
		}
		if c < 0 {
			continue
		}
		ch := &g.Channels[c]
		ch.Messages = ch.Messages[:len(ch.Messages)-1]
		ch.Sent--
		if g.ReceiverCounts {
			// The receiver's counts show the message gone: a forger must
			// change them too.
			_, err = persistence.EncodeGlobal(g)
			var rb *snapshot.ReceiverBalanceError
			require.ErrorAs(t, err, &rb, "a message left out of an epoch snapshot")
			i := slices.IndexFunc(g.Participants, func(p snapshot.Participant) bool { return p.ID == ch.Channel.To })
			g.Participants[i].SentTo--
		}
		if g.Sums != nil {
			// So do the sums: a forger must change them too.
			_, err = persistence.EncodeGlobal(g)
			var sb *snapshot.SumBalanceError
			require.ErrorAs(t, err, &sb, "a message left out of a snapshot counted in sums")
			g.Sums.Sent--
		}
		data, err = persistence.EncodeGlobal(g)
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(snap, "global.dat"), data, 0o600))
		rewriteManifestEntry(t, filepath.Join(snap, "MANIFEST"), "global.dat", data)
		return g.ID
	}
	t.Fatal("no snapshot has a message in flight")
	return 0
}

// rewriteManifestEntry sets the size and CRC-32C of file name in the
// manifest at path to those of data, and the manifest's own checksum: the
// envelope "ASNAPMAN", version, msgpack [id, [[name, size, crc], ...]],
// CRC-32C.
func rewriteManifestEntry(t *testing.T, path, name string, data []byte) {
	t.Helper()
	castagnoli := crc32.MakeTable(crc32.Castagnoli)
	man, err := os.ReadFile(path)
	require.NoError(t, err)
	var body []any
	require.NoError(t, msgpack.Unmarshal(man[10:len(man)-4], &body))
	files := body[1].([]any)
	var buf bytes.Buffer
	e := msgpack.NewEncoder(&buf)
	require.NoError(t, e.EncodeArrayLen(2))
	require.NoError(t, e.EncodeUint(asUint(body[0])))
	require.NoError(t, e.EncodeArrayLen(len(files)))
	for _, f := range files {
		f := f.([]any)
		size, crc := asUint(f[1]), asUint(f[2])
		if f[0] == name {
			size, crc = uint64(len(data)), uint64(crc32.Checksum(data, castagnoli))
		}
		require.NoError(t, e.EncodeArrayLen(3))
		require.NoError(t, e.EncodeString(f[0].(string)))
		require.NoError(t, e.EncodeUint(size))
		require.NoError(t, e.EncodeUint(crc))
	}
	b := buf.Bytes()
	out := append(append([]byte(nil), man[:10]...), b...)
	out = binary.BigEndian.AppendUint32(out, crc32.Checksum(out, castagnoli))
	require.NoError(t, os.WriteFile(path, out, 0o600))
}

// asUint returns a number msgpack decoded into an interface.
func asUint(v any) uint64 {
	switch n := v.(type) {
	case int8:
		return uint64(n)
	case int16:
		return uint64(n)
	case int32:
		return uint64(n)
	case int64:
		return uint64(n)
	case uint8:
		return uint64(n)
	case uint16:
		return uint64(n)
	case uint32:
		return uint64(n)
	case uint64:
		return n
	}
	panic(fmt.Sprintf("not a number: %T", v))
}

// TestKeys signs a store's snapshots with a key from a file, forges one
// with every checksum recomputed, and shows verify, show and restore
// refusing it with the key (from the file or the environment), naming the
// snapshot and the key, while without the key verify accepts it:
// checksums catch accidents, a MAC catches changes made on purpose.
func TestKeys(t *testing.T) {
	secret := base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{7}, 32))
	keyFile := writeKeys(t, "# the demo's key\nk1:"+secret+"\n")
	store := filepath.Join(t.TempDir(), "snaps")
	out, _, err := actorsnap(t, "run", "bank", "--store", store, "--actors", "100", "--interval", "20ms", "--duration", "400ms", "--key-file", keyFile)
	require.NoError(t, err, out)
	ids := storedIDs(t, store)
	_, err = os.Stat(filepath.Join(store, fmt.Sprintf("snap-%020d", ids[0]), "MAC"))
	require.NoError(t, err, "snapshots are signed")
	out, _, err = actorsnap(t, "verify", "latest", "--store", store, "--key-file", keyFile, "--require-signed")
	require.NoError(t, err)
	assert.Contains(t, out, "ok")
	assert.Contains(t, out, "the sums balance", "the demo's epoch snapshots, counted in sums, keep their sums")

	id := forgeDroppingMessage(t, store)
	sid := fmt.Sprint(id)
	out, stderr, err := actorsnap(t, "verify", sid, "--store", store)
	require.NoError(t, err, "without the key, the forgery passes every checksum: %s", stderr)
	assert.Contains(t, out, "ok: checksums match")

	want := []string{"snapshot " + sid + " is not authentic", `key "k1"`}
	fails(t, want, "verify", sid, "--store", store, "--key-file", keyFile)
	fails(t, want, "show", sid, "--store", store, "--key-file", keyFile)
	fails(t, want, "restore", sid, "--store", store, "--key-file", keyFile, "--duration", "100ms")
	for _, env := range [][]string{{envKeyFile + "=" + keyFile}, {envKey + "=k1:" + secret}} {
		_, stderr, err := actorsnapEnv(t, env, "verify", sid, "--store", store)
		var exit *exec.ExitError
		require.True(t, errors.As(err, &exit), "%v", env)
		for _, w := range want {
			assert.Contains(t, stderr, w, "%v", env)
		}
		assert.NotContains(t, stderr, secret)
	}
	out, _, err = actorsnap(t, "ls", "--store", store, "--key-file", keyFile)
	require.NoError(t, err)
	assert.Contains(t, out, "not authentic", "ls shows the forgery as damage")

	// A key that does not know k1, and a snapshot without a MAC where
	// signatures are required.
	other := writeKeys(t, "k2:"+base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{8}, 32)))
	fails(t, []string{`signed with key "k1", which the keyring does not hold`}, "verify", fmt.Sprint(ids[0]), "--store", store, "--key-file", other)
	plain := filepath.Join(t.TempDir(), "plain")
	runSmallBank(t, plain)
	_, _, err = actorsnap(t, "verify", "latest", "--store", plain, "--key-file", keyFile)
	require.NoError(t, err, "an unsigned snapshot loads unless signatures are required")
	fails(t, []string{"has no MAC, and signatures are required"}, "verify", "latest", "--store", plain, "--key-file", keyFile, "--require-signed")

	// Bad key input, never echoing a secret.
	fails(t, []string{"--require-signed needs keys"}, "verify", "latest", "--store", plain, "--require-signed")
	loose := writeKeys(t, "k1:"+secret)
	require.NoError(t, os.Chmod(loose, 0o644))
	fails(t, []string{"others may read it"}, "verify", "latest", "--store", plain, "--key-file", loose)
	_, stderr, err = actorsnapEnv(t, []string{envKey + "=k1:" + secret}, "verify", "latest", "--store", plain, "--key-file", keyFile)
	require.Error(t, err)
	assert.Contains(t, stderr, "give them in one")
	_, stderr, err = actorsnapEnv(t, []string{envKey + "=k1:" + secret[:10]}, "verify", "latest", "--store", plain)
	require.Error(t, err)
	assert.Contains(t, stderr, envKey)
	assert.NotContains(t, stderr, secret[:10])
	assert.True(t, strings.HasPrefix(strings.TrimSpace(stderr), "actorsnap: "))
}
