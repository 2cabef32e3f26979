package engine

import (
	"bytes"
	"encoding/binary"
	"fmt"
)

// Table prefixes; see doc.go.
const (
	prefixMeta     byte = 0x01
	prefixKV       byte = 0x02
	prefixIntent   byte = 0x03
	prefixRecord   byte = 0x04
	prefixFinished byte = 0x05
)

const (
	// MaxKeyLen bounds a user key.
	MaxKeyLen = 64 << 10
	// MaxTxnIDLen bounds a transaction id.
	MaxTxnIDLen = 256
)

var (
	keyApplied     = []byte{prefixMeta, 'a'}
	keyHorizon     = []byte{prefixMeta, 'h'}
	keyCutProgress = []byte{prefixMeta, 'c'}
	keyCount       = []byte{prefixMeta, 'n'}
)

func tableName(prefix byte) string {
	switch prefix {
	case prefixMeta:
		return "meta"
	case prefixKV:
		return "kv"
	case prefixIntent:
		return "intents"
	case prefixRecord:
		return "records"
	case prefixFinished:
		return "finished"
	}
	return fmt.Sprintf("unknown(%#x)", prefix)
}

// KV is one committed user key-value. Get and Scan return copies the
// caller owns.
type KV struct {
	Key         []byte
	Value       []byte
	Version     uint64 // number of puts since the key was created
	CreateIndex uint64 // applied index of the put that created the key
	ModIndex    uint64 // applied index of the last put
}

func checkKey(key []byte) error {
	if len(key) == 0 || len(key) > MaxKeyLen {
		return fmt.Errorf("%w: length %d (want 1..%d)", ErrInvalidKey, len(key), MaxKeyLen)
	}
	return nil
}

func checkTxnID(id []byte) error {
	if len(id) == 0 || len(id) > MaxTxnIDLen {
		return fmt.Errorf("%w: length %d (want 1..%d)", ErrInvalidTxnID, len(id), MaxTxnIDLen)
	}
	return nil
}

func makeKey(prefix byte, b []byte) []byte {
	k := make([]byte, 1+len(b))
	k[0] = prefix
	copy(k[1:], b)
	return k
}

// decodeKVKey returns the user key of a kv table key (aliasing k).
func decodeKVKey(k []byte) ([]byte, error) {
	if len(k) == 0 || k[0] != prefixKV {
		return nil, corruptf("kv", k, "not a kv key")
	}
	if err := checkKey(k[1:]); err != nil {
		return nil, corruptf("kv", k, "%v", err)
	}
	return k[1:], nil
}

// decodeTxnKey returns the transaction id of a key of the transaction table
// prefix (aliasing k).
func decodeTxnKey(prefix byte, k []byte) ([]byte, error) {
	if len(k) == 0 || k[0] != prefix {
		return nil, corruptf(tableName(prefix), k, "not a %s key", tableName(prefix))
	}
	if err := checkTxnID(k[1:]); err != nil {
		return nil, corruptf(tableName(prefix), k, "%v", err)
	}
	return k[1:], nil
}

// readUvarint reads one minimal uvarint from b and returns it with the rest.
func readUvarint(b []byte) (uint64, []byte, error) {
	v, n := binary.Uvarint(b)
	switch {
	case n == 0:
		return 0, nil, fmt.Errorf("truncated varint")
	case n < 0:
		return 0, nil, fmt.Errorf("varint overflows 64 bits")
	case n != uvarintLen(v):
		return 0, nil, fmt.Errorf("non-minimal varint")
	}
	return v, b[n:], nil
}

func uvarintLen(v uint64) int {
	n := 1
	for v >= 0x80 {
		v >>= 7
		n++
	}
	return n
}

func encodeValue(kv KV) []byte {
	b := make([]byte, 0, 3*binary.MaxVarintLen64+len(kv.Value))
	b = binary.AppendUvarint(b, kv.Version)
	b = binary.AppendUvarint(b, kv.CreateIndex)
	b = binary.AppendUvarint(b, kv.ModIndex)
	return append(b, kv.Value...)
}

// decodeValue decodes a kv table value; key is the Pebble key, used in the
// error. The returned Value aliases v.
func decodeValue(key, v []byte) (KV, error) {
	var kv KV
	var err error
	rest := v
	for i, dst := range []*uint64{&kv.Version, &kv.CreateIndex, &kv.ModIndex} {
		if *dst, rest, err = readUvarint(rest); err != nil {
			return KV{}, corruptf("kv", key, "field %d: %v", i, err)
		}
	}
	kv.Value = rest
	return kv, nil
}

func encodeIntent(index uint64, data []byte) []byte {
	b := make([]byte, 0, binary.MaxVarintLen64+len(data))
	b = binary.AppendUvarint(b, index)
	return append(b, data...)
}

// decodeIntent decodes an intent value; data aliases v.
func decodeIntent(key, v []byte) (index uint64, data []byte, err error) {
	index, data, err = readUvarint(v)
	if err != nil {
		return 0, nil, corruptf("intents", key, "index: %v", err)
	}
	return index, data, nil
}

func encodeUint64(v uint64) []byte {
	return binary.BigEndian.AppendUint64(nil, v)
}

// decodeUint64 decodes an 8-byte big-endian value of table at key.
func decodeUint64(table string, key, v []byte) (uint64, error) {
	if len(v) != 8 {
		return 0, corruptf(table, key, "length %d, want 8", len(v))
	}
	return binary.BigEndian.Uint64(v), nil
}

// prefixEnd returns the exclusive upper bound of a table.
func prefixEnd(prefix byte) []byte { return []byte{prefix + 1} }

func clone(b []byte) []byte { return bytes.Clone(b) }
