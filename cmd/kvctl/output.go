package main

import (
	"encoding/json"
	"fmt"
	"io"

	"github.com/cutkv/cutkv/client"
)

// The JSON shapes of -o json (docs/cli.md). []byte fields encode as
// base64, so binary keys and values survive.

type jsonHeader struct {
	ClusterID  string `json:"cluster_id"`
	MemberID   string `json:"member_id"`
	RaftTerm   uint64 `json:"raft_term"`
	CutVersion uint64 `json:"cut_version"`
}

func toJSONHeader(h client.Header) jsonHeader {
	return jsonHeader{ClusterID: h.ClusterID, MemberID: h.MemberID, RaftTerm: h.RaftTerm, CutVersion: h.CutVersion}
}

type jsonKV struct {
	Key []byte `json:"key"`
	// Value is left out for --keys-only (omitzero drops only nil).
	Value       []byte `json:"value,omitzero"`
	Version     int64  `json:"version"`
	CreateIndex uint64 `json:"create_index"`
	ModIndex    uint64 `json:"mod_index"`
}

func toJSONKVs(kvs []client.KeyValue, keysOnly bool) []jsonKV {
	out := make([]jsonKV, 0, len(kvs))
	for _, kv := range kvs {
		j := jsonKV{Key: kv.Key, Version: kv.Version, CreateIndex: kv.CreateIndex, ModIndex: kv.ModIndex}
		if !keysOnly {
			j.Value = kv.Value
			if j.Value == nil {
				j.Value = []byte{}
			}
		}
		out = append(out, j)
	}
	return out
}

type jsonKVs struct {
	Header jsonHeader `json:"header"`
	KVs    []jsonKV   `json:"kvs"`
	Count  int        `json:"count"`
	More   *bool      `json:"more,omitempty"` // scan only
}

type jsonPut struct {
	Header jsonHeader `json:"header"`
}

type jsonDel struct {
	Header  jsonHeader `json:"header"`
	Deleted int        `json:"deleted"`
}

// jsonTxn is the output of txn: one entry of responses per op of the
// branch that ran, an object with one field named after the op.
type jsonTxn struct {
	Header    jsonHeader        `json:"header"`
	Succeeded bool              `json:"succeeded"`
	Responses []jsonTxnOpResult `json:"responses"`
}

type jsonTxnOpResult struct {
	Get    *jsonTxnRead   `json:"get,omitempty"`
	Put    *struct{}      `json:"put,omitempty"`
	Delete *jsonTxnDelete `json:"delete,omitempty"`
	Scan   *jsonTxnRead   `json:"scan,omitempty"`
}

type jsonTxnRead struct {
	KVs   []jsonKV `json:"kvs"`
	Count int      `json:"count"`
	More  *bool    `json:"more,omitempty"` // scan only
}

type jsonTxnDelete struct {
	Deleted int64 `json:"deleted"`
}

func toJSONTxn(resp *client.TxnResponse) jsonTxn {
	j := jsonTxn{Header: toJSONHeader(resp.Header), Succeeded: resp.Succeeded, Responses: []jsonTxnOpResult{}}
	for _, r := range resp.Responses {
		var o jsonTxnOpResult
		switch r.Kind {
		case client.KindGet:
			o.Get = &jsonTxnRead{KVs: toJSONKVs(r.KVs, false), Count: len(r.KVs)}
		case client.KindPut:
			o.Put = &struct{}{}
		case client.KindDelete:
			o.Delete = &jsonTxnDelete{Deleted: r.Deleted}
		case client.KindScan:
			more := r.More
			o.Scan = &jsonTxnRead{KVs: toJSONKVs(r.KVs, false), Count: len(r.KVs), More: &more}
		}
		j.Responses = append(j.Responses, o)
	}
	return j
}

type jsonMember struct {
	ID          string `json:"id"`
	RaftID      uint64 `json:"raft_id"`
	GRPCAddr    string `json:"grpc_addr"`
	PeerAddr    string `json:"peer_addr"`
	GossipAddr  string `json:"gossip_addr"`
	HTTPAddr    string `json:"http_addr"`
	State       string `json:"state"`
	SinceUnixMs int64  `json:"since_unix_ms"`
}

type jsonMembers struct {
	Header  jsonHeader   `json:"header"`
	Members []jsonMember `json:"members"`
}

type jsonGroup struct {
	ID           uint64   `json:"id"`
	Leader       string   `json:"leader"`
	Term         uint64   `json:"term"`
	CommitIndex  uint64   `json:"commit_index"`
	AppliedIndex uint64   `json:"applied_index"`
	Replicas     []string `json:"replicas"`
	ReportedBy   string   `json:"reported_by"`
	Keys         uint64   `json:"keys"`
	// Checkpoints, as the reporting node holds them.
	MaterializedIndex uint64 `json:"materialized_index"`
	Materializations  uint32 `json:"materializations"`
	WALTailEntries    uint64 `json:"wal_tail_entries"`
	WALTailBytes      uint64 `json:"wal_tail_bytes"`
}

type jsonNode struct {
	ID             string `json:"id"`
	Serving        bool   `json:"serving"`
	WALBytes       int64  `json:"wal_bytes"`
	WALFirstIndex  uint64 `json:"wal_first_index"`
	WALLastIndex   uint64 `json:"wal_last_index"`
	DiskFreeBytes  uint64 `json:"disk_free_bytes"`
	DiskTotalBytes uint64 `json:"disk_total_bytes"`
	Version        string `json:"version"`
	Error          string `json:"error,omitempty"`
}

type jsonStatus struct {
	Header     jsonHeader  `json:"header"`
	ClusterID  string      `json:"cluster_id"`
	Partitions uint32      `json:"partitions"`
	Groups     []jsonGroup `json:"groups"`
	Nodes      []jsonNode  `json:"nodes"`
}

// writeJSON prints v as one line of JSON.
func writeJSON(w io.Writer, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "%s\n", b)
	return err
}

// humanBytes renders n in IEC units: "512 B", "1.5 KiB", "20.0 GiB".
func humanBytes(n uint64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := uint64(unit), 0
	for m := n / unit; m >= unit && exp < 5; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}
