package persistence

import (
	"encoding/binary"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/actorsnap/actorsnap/snapshot"
)

// manifest lists the data files of a stored snapshot with their sizes and
// CRC-32C checksums. A FileStore writes it last: a snapshot directory
// without a valid manifest is not a snapshot.
type manifest struct {
	ID    snapshot.SnapshotID
	Files []manifestFile
}

type manifestFile struct {
	Name string
	Size int64
	CRC  uint32
}

// Limits of a manifest.
const (
	maxManifestSize  = 1 << 16
	maxManifestFiles = 16
	maxFileNameSize  = 255
)

// encodeManifest returns the stored form of m: the envelope (magic
// "ASNAPMAN", FormatVersion, CRC-32C) around the msgpack array
// [id, [[name, size, crc32c], ...]].
func encodeManifest(m manifest) ([]byte, error) {
	if err := m.check(); err != nil {
		return nil, err
	}
	b := appendEnvelopeHeader(make([]byte, 0, 64+len(m.Files)*(maxFileNameSize+16)), manifestMagic)
	b = appendArray(b, 2)
	b = appendUint(b, uint64(m.ID))
	b = appendArray(b, len(m.Files))
	for _, f := range m.Files {
		b = appendArray(b, 3)
		b = appendString(b, f.Name)
		b = appendUint(b, uint64(f.Size))
		b = appendUint(b, uint64(f.CRC))
	}
	return sealEnvelope(b)
}

// check returns why m cannot be stored or trusted.
func (m manifest) check() error {
	if m.ID == 0 {
		return fmt.Errorf("manifest: snapshot id is 0")
	}
	if len(m.Files) > maxManifestFiles {
		return fmt.Errorf("manifest: %d files, more than %d", len(m.Files), maxManifestFiles)
	}
	seen := make(map[string]bool, len(m.Files))
	for _, f := range m.Files {
		if !validFileName(f.Name) {
			return fmt.Errorf("manifest: invalid file name %q", f.Name)
		}
		if seen[f.Name] {
			return fmt.Errorf("manifest: file %q listed twice", f.Name)
		}
		seen[f.Name] = true
		if f.Size < 0 || f.Size > MaxEncodedSize {
			return fmt.Errorf("manifest: file %q: size %d out of range", f.Name, f.Size)
		}
	}
	return nil
}

// validFileName reports whether name can be a data file of a snapshot
// directory: a plain name, not hidden, not the manifest's.
func validFileName(name string) bool {
	return name != "" && len(name) <= maxFileNameSize && name != manifestName &&
		!strings.HasPrefix(name, ".") && !strings.ContainsAny(name, "/\\\x00")
}

// decodeManifest decodes the stored form written by encodeManifest,
// reporting any fault as a *CorruptError.
func decodeManifest(data []byte) (manifest, error) {
	if len(data) > maxManifestSize {
		return manifest{}, &CorruptError{Offset: maxManifestSize, Reason: fmt.Sprintf("manifest of %d bytes, more than %d", len(data), maxManifestSize)}
	}
	d, err := openEnvelope(data, manifestMagic, "manifest", true)
	if err != nil {
		return manifest{}, err
	}
	if err := d.tuple(2, "manifest"); err != nil {
		return manifest{}, err
	}
	var m manifest
	id, err := d.uint("snapshot id")
	if err != nil {
		return manifest{}, err
	}
	m.ID = snapshot.SnapshotID(id)
	n, err := d.array("files", maxManifestFiles, 4, 48)
	if err != nil {
		return manifest{}, err
	}
	if n > 0 {
		m.Files = make([]manifestFile, n)
	}
	for i := range m.Files {
		f := &m.Files[i]
		if err := d.tuple(3, "file"); err != nil {
			return manifest{}, err
		}
		b, err := d.raw("file name", true, maxFileNameSize)
		if err != nil {
			return manifest{}, err
		}
		f.Name = string(b)
		off := d.pos
		size, err := d.uint("file size")
		if err != nil {
			return manifest{}, err
		}
		if size > MaxEncodedSize {
			return manifest{}, d.corrupt(off, "file size %d, more than %d", size, MaxEncodedSize)
		}
		f.Size = int64(size)
		off = d.pos
		crc, err := d.uint("file checksum")
		if err != nil {
			return manifest{}, err
		}
		if crc > math.MaxUint32 {
			return manifest{}, d.corrupt(off, "file checksum %d out of range", crc)
		}
		f.CRC = uint32(crc)
	}
	if err := d.done(); err != nil {
		return manifest{}, err
	}
	if err := m.check(); err != nil {
		return manifest{}, &CorruptError{Offset: headerSize, Reason: err.Error()}
	}
	return m, nil
}

// fileLayout names the FileStore's stored form in its MACs (see Keyring.Sign).
const fileLayout = "file"

var macMagic = [8]byte{'A', 'S', 'N', 'A', 'P', 'M', 'A', 'C'}

// macSize is the size of an HMAC-SHA256, and macFileSize bounds the file
// that holds one.
const (
	macSize     = 32
	macFileSize = 256
)

// macRecord is the content of a snapshot directory's MAC file: the id of the
// key and the MAC (see Keyring) of the snapshot's data files, as
// writeMACEntry and the files' bytes give them to it.
type macRecord struct {
	ID    snapshot.SnapshotID
	KeyID string
	Sum   []byte
}

// writeMACEntry writes to m the entry of one data file that precedes its
// bytes: the name's length (4 bytes), the name and the size (8 bytes),
// big-endian.
func writeMACEntry(m *MAC, name string, size int64) {
	b := make([]byte, 0, 12+len(name))
	b = binary.BigEndian.AppendUint32(b, uint32(len(name)))
	b = append(b, name...)
	b = binary.BigEndian.AppendUint64(b, uint64(size))
	m.Write(b)
}

// encodeMACFile returns the stored form of f: the envelope (magic
// "ASNAPMAC", FormatVersion, CRC-32C) around the msgpack array [id, key
// id, mac].
func encodeMACFile(f macRecord) ([]byte, error) {
	b := appendEnvelopeHeader(make([]byte, 0, macFileSize), macMagic)
	b = appendArray(b, 3)
	b = appendUint(b, uint64(f.ID))
	b = appendString(b, f.KeyID)
	b = appendBytes(b, f.Sum)
	return sealEnvelope(b)
}

// decodeMACFile decodes what encodeMACFile wrote, reporting any fault as
// a *CorruptError.
func decodeMACFile(data []byte) (macRecord, error) {
	if len(data) > macFileSize {
		return macRecord{}, &CorruptError{Offset: macFileSize, Reason: fmt.Sprintf("MAC file of %d bytes, more than %d", len(data), macFileSize)}
	}
	d, err := openEnvelope(data, macMagic, "MAC file", true)
	if err != nil {
		return macRecord{}, err
	}
	if err := d.tuple(3, "MAC file"); err != nil {
		return macRecord{}, err
	}
	var f macRecord
	id, err := d.uint("snapshot id")
	if err != nil {
		return macRecord{}, err
	}
	f.ID = snapshot.SnapshotID(id)
	off := d.pos
	keyID, err := d.raw("key id", true, maxKeyID)
	if err != nil {
		return macRecord{}, err
	}
	if f.KeyID = string(keyID); checkKeyID(f.KeyID) != nil {
		return macRecord{}, d.corrupt(off, "invalid key id %q", f.KeyID)
	}
	off = d.pos
	if f.Sum, err = d.raw("MAC", false, macSize); err != nil {
		return macRecord{}, err
	}
	if len(f.Sum) != macSize {
		return macRecord{}, d.corrupt(off, "MAC of %d bytes, want %d", len(f.Sum), macSize)
	}
	f.Sum = slices.Clone(f.Sum)
	if err := d.done(); err != nil {
		return macRecord{}, err
	}
	return f, nil
}
