package main

import (
	"reflect"
	"strings"
	"testing"

	"github.com/cutkv/cutkv/internal/version"
)

// smallIDs are the JSON number fields named like ids whose values stay far
// below 2^53, so that jq and JavaScript read them exactly: member raft ids
// are 1..members, groups and partitions 0..partitions.
var smallIDs = map[string]string{
	"raft_id": "1..number of members (topology.Layout)",
	"id":      "a group id in status: 0..partitions",
}

// TestJSONIDsAreStrings: every id in -o json that can exceed 2^53 (cluster
// ids, hashes) is a string of hex digits, never a JSON number, which most
// JSON tools read as a float and round (docs/cli.md, JSON output).
func TestJSONIDsAreStrings(t *testing.T) {
	types := []any{
		jsonReplicaHash{}, jsonPartitionCheck{}, jsonCheck{}, jsonGroupCheckpoint{}, jsonCheckpoint{}, jsonCutPartition{}, jsonCut{},
		jsonCutResponse{}, jsonCutList{}, jsonEndpointHealth{}, jsonEndpointHealthList{}, jsonHeader{}, jsonKV{}, jsonKVs{}, jsonPut{},
		jsonDel{}, jsonTxn{}, jsonTxnOpResult{}, jsonTxnRead{}, jsonTxnDelete{}, jsonMember{}, jsonMembers{}, jsonGroup{}, jsonNode{},
		jsonStatus{}, jsonSnapshotPiece{}, jsonSnapshotPartition{}, jsonSnapshot{}, jsonSnapshotResult{}, jsonSnapshotCreateResponse{},
		jsonSnapshotList{}, jsonSnapshotShow{}, jsonSnapshotCheck{}, jsonSnapshotGC{}, version.Info{},
	}
	seen := map[reflect.Type]bool{}
	var walk func(path string, ty reflect.Type)
	walk = func(path string, ty reflect.Type) {
		for ty.Kind() == reflect.Pointer || ty.Kind() == reflect.Slice {
			ty = ty.Elem()
		}
		if ty.Kind() != reflect.Struct || seen[ty] {
			return
		}
		seen[ty] = true
		for i := range ty.NumField() {
			f := ty.Field(i)
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			idLike := name == "id" || strings.HasSuffix(name, "_id") || name == "cluster" || name == "hash"
			ft := f.Type
			for ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			switch ft.Kind() {
			case reflect.Uint64, reflect.Int64, reflect.Uint, reflect.Int, reflect.Float64:
				if _, small := smallIDs[name]; idLike && !small {
					t.Errorf("%s.%s (%q) is a JSON number: an id that can exceed 2^53 must be a string", path, f.Name, name)
				}
			}
			walk(path+"."+f.Name, f.Type)
		}
	}
	for _, v := range types {
		walk(reflect.TypeOf(v).Name(), reflect.TypeOf(v))
	}
}
