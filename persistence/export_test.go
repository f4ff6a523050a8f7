package persistence

import (
	"encoding/binary"
	"hash/crc32"

	"github.com/actorsnap/actorsnap/snapshot"
)

// Internals for the external tests.

type (
	Manifest     = manifest
	ManifestFile = manifestFile
)

const (
	HeaderSize   = headerSize
	ManifestName = manifestName
	DataName     = dataName
)

// DecodeGlobalCounted is DecodeGlobal that also returns what it allocated;
// with alias the strings share data's memory, as the FileStore's do.
func DecodeGlobalCounted(data []byte, alias bool) (*snapshot.Global, int, error) {
	return decodeGlobal(data, true, alias)
}

var (
	EncodeManifest = encodeManifest
	DecodeManifest = decodeManifest
	EncodeOwner    = encodeOwner
	DecodeOwner    = decodeOwner
)

type OwnerRecord = ownerRecord

// Reseal sets the format version of an envelope and recomputes its
// checksum.
func Reseal(data []byte, version uint16) []byte {
	b := append([]byte(nil), data...)
	binary.BigEndian.PutUint16(b[8:], version)
	body := b[:len(b)-trailerSize]
	binary.BigEndian.PutUint32(b[len(body):], crc32.Checksum(body, castagnoli))
	return b
}

// FixChecksum recomputes the checksum of an envelope, so that a fuzzer's
// changes reach the body decoder.
func FixChecksum(data []byte) []byte {
	if len(data) < headerSize+trailerSize {
		return data
	}
	body := data[:len(data)-trailerSize]
	binary.BigEndian.PutUint32(data[len(body):], crc32.Checksum(body, castagnoli))
	return data
}

// EncodeSplit is the FileStore's encoder: the stored form in segments,
// and whether it was split over two goroutines.
func EncodeSplit(g *snapshot.Global) (segs [][]byte, split bool, err error) {
	e, err := encodeSplit(g, [2][]byte{}, true)
	return e.segs, len(e.bufs[1]) > trailerSize, err
}
