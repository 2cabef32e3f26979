package engine

// Metrics are what a DB reports of its Pebble for monitoring.
type Metrics struct {
	// L0Files and L0Sublevels: files waiting in level 0 and its read
	// amplification; both grow when compactions fall behind.
	L0Files     int64
	L0Sublevels int32
	// Files and TableBytes: SSTs in every level and their size.
	Files      int64
	TableBytes int64
	// DiskBytes: everything the DB's directory holds (SSTs, MANIFEST,
	// OPTIONS, obsolete files not yet deleted).
	DiskBytes uint64
	// MemtableBytes: bytes of the memtables (inside the cache budget).
	MemtableBytes uint64
	// Compactions and Flushes count since the DB opened.
	Compactions int64
	Flushes     int64
	// CacheBytes, CacheHits and CacheMisses are the shared block cache's
	// (the same in every DB of an Env).
	CacheBytes, CacheHits, CacheMisses int64
}

// Metrics returns the DB's Pebble metrics.
func (d *DB) Metrics() (Metrics, error) {
	if err := d.enter(); err != nil {
		return Metrics{}, err
	}
	defer d.life.RUnlock()
	m := d.pdb.Metrics()
	total := m.Total()
	return Metrics{
		L0Files:       m.Levels[0].TablesCount,
		L0Sublevels:   m.Levels[0].Sublevels,
		Files:         total.TablesCount,
		TableBytes:    total.TablesSize,
		DiskBytes:     m.DiskSpaceUsage(),
		MemtableBytes: m.MemTable.Size,
		Compactions:   m.Compact.Count,
		Flushes:       m.Flush.Count,
		CacheBytes:    m.BlockCache.Size,
		CacheHits:     m.BlockCache.Hits,
		CacheMisses:   m.BlockCache.Misses,
	}, nil
}
