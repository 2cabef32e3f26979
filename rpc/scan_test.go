package rpc

import (
	"fmt"
	"testing"

	"github.com/cutkv/cutkv/proto/kvpb"
)

func kvs(keys ...string) []*kvpb.KeyValue {
	var out []*kvpb.KeyValue
	for _, k := range keys {
		out = append(out, &kvpb.KeyValue{Key: []byte(k)})
	}
	return out
}

func keysOf(r *kvpb.ScanResponse) string {
	s := ""
	for _, kv := range r.GetKvs() {
		s += string(kv.GetKey())
	}
	return s
}

func TestMergeScan(t *testing.T) {
	cases := []struct {
		name     string
		shares   []*kvpb.ScanResponse
		limit    int
		want     string
		wantMore bool
	}{
		{"plain merge", []*kvpb.ScanResponse{{Kvs: kvs("a", "d")}, {Kvs: kvs("b", "c")}}, 10, "abcd", false},
		{"limit cuts", []*kvpb.ScanResponse{{Kvs: kvs("a", "d")}, {Kvs: kvs("b", "c")}}, 3, "abc", true},
		// Share 1 was cut after "b" (e.g. by bytes): keys after "b" from
		// other shares must wait for the next page, or "c" would be skipped.
		{"short share bounds the answer", []*kvpb.ScanResponse{{Kvs: kvs("a", "b"), More: true}, {Kvs: kvs("d", "e")}}, 10, "ab", true},
		{"two short shares: smallest last key wins", []*kvpb.ScanResponse{{Kvs: kvs("a", "f"), More: true}, {Kvs: kvs("b", "c"), More: true}, {Kvs: kvs("d")}}, 10, "abc", true},
		{"empty", []*kvpb.ScanResponse{{}, {}}, 10, "", false},
	}
	for _, tc := range cases {
		errs := make([]error, len(tc.shares))
		got, err := mergeScan(&kvpb.ResponseHeader{}, tc.shares, errs, tc.limit)
		if err != nil {
			t.Fatal(err)
		}
		if keysOf(got) != tc.want || got.GetMore() != tc.wantMore {
			t.Errorf("%s: got %q more=%v, want %q more=%v", tc.name, keysOf(got), got.GetMore(), tc.want, tc.wantMore)
		}
	}
	errs := []error{nil, fmt.Errorf("boom")}
	if _, err := mergeScan(&kvpb.ResponseHeader{}, []*kvpb.ScanResponse{{}, nil}, errs, 10); err == nil {
		t.Fatal("a failed share did not fail the scan")
	}
}
