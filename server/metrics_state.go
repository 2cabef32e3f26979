package server

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/cutkv/cutkv/partition"
)

// stateCollector exports the partitions' Pebble metrics at each scrape.
type stateCollector struct {
	partitions map[uint64]*partition.Partition
}

var (
	stateL0Files     = prometheus.NewDesc("cutkv_state_l0_files", "SST files in level 0 of a partition's Pebble (grows when compactions fall behind).", []string{"partition"}, nil)
	stateL0Sublevels = prometheus.NewDesc("cutkv_state_l0_sublevels", "Level 0 sublevels of a partition's Pebble: its read amplification there.", []string{"partition"}, nil)
	stateFiles       = prometheus.NewDesc("cutkv_state_sst_files", "SST files in every level of a partition's Pebble.", []string{"partition"}, nil)
	stateTableBytes  = prometheus.NewDesc("cutkv_state_sst_bytes", "Bytes of the SST files of a partition's Pebble.", []string{"partition"}, nil)
	stateDiskBytes   = prometheus.NewDesc("cutkv_state_disk_bytes", "Bytes a partition's Pebble directory holds.", []string{"partition"}, nil)
	stateMemBytes    = prometheus.NewDesc("cutkv_state_memtable_bytes", "Bytes of a partition's Pebble memtables.", []string{"partition"}, nil)
	stateCompactions = prometheus.NewDesc("cutkv_state_compactions_total", "Compactions of a partition's Pebble since it opened.", []string{"partition"}, nil)
	stateFlushes     = prometheus.NewDesc("cutkv_state_flushes_total", "Flushes of a partition's Pebble since it opened.", []string{"partition"}, nil)
	stateCacheBytes  = prometheus.NewDesc("cutkv_state_cache_bytes", "Bytes in the block cache the partitions share (--cache-size).", nil, nil)
	stateCacheHits   = prometheus.NewDesc("cutkv_state_cache_hits_total", "Block cache hits.", nil, nil)
	stateCacheMisses = prometheus.NewDesc("cutkv_state_cache_misses_total", "Block cache misses.", nil, nil)
)

func (c stateCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{stateL0Files, stateL0Sublevels, stateFiles, stateTableBytes, stateDiskBytes, stateMemBytes,
		stateCompactions, stateFlushes, stateCacheBytes, stateCacheHits, stateCacheMisses} {
		ch <- d
	}
}

func (c stateCollector) Collect(ch chan<- prometheus.Metric) {
	cache := false
	for g, p := range c.partitions {
		m, ok, err := p.StoreMetrics()
		if !ok || err != nil {
			continue // a store that stopped reports nothing; its error stops the node
		}
		l := strconv.FormatUint(g, 10)
		gauge := func(d *prometheus.Desc, v float64) {
			ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, l)
		}
		gauge(stateL0Files, float64(m.L0Files))
		gauge(stateL0Sublevels, float64(m.L0Sublevels))
		gauge(stateFiles, float64(m.Files))
		gauge(stateTableBytes, float64(m.TableBytes))
		gauge(stateDiskBytes, float64(m.DiskBytes))
		gauge(stateMemBytes, float64(m.MemtableBytes))
		ch <- prometheus.MustNewConstMetric(stateCompactions, prometheus.CounterValue, float64(m.Compactions), l)
		ch <- prometheus.MustNewConstMetric(stateFlushes, prometheus.CounterValue, float64(m.Flushes), l)
		if !cache {
			cache = true
			ch <- prometheus.MustNewConstMetric(stateCacheBytes, prometheus.GaugeValue, float64(m.CacheBytes))
			ch <- prometheus.MustNewConstMetric(stateCacheHits, prometheus.CounterValue, float64(m.CacheHits))
			ch <- prometheus.MustNewConstMetric(stateCacheMisses, prometheus.CounterValue, float64(m.CacheMisses))
		}
	}
}
