package keyspace

// HashName names the key-hash function; snapshot manifests and the Routing
// RPC carry it so that a reader can refuse a layout it does not understand.
const HashName = "fnv1a64-mod"

// PartitionOf returns the partition (1..partitions) that holds key: FNV-1a
// 64 of the key, modulo the partition count, plus one (group 0 is the
// metadata group and holds no keys). partitions must be > 0.
func PartitionOf(key []byte, partitions uint32) uint64 {
	const (
		offset64 = 14695981039346656037
		prime64  = 1099511628211
	)
	h := uint64(offset64)
	for _, c := range key {
		h ^= uint64(c)
		h *= prime64
	}
	return h%uint64(partitions) + 1
}
