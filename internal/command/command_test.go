package command

import (
	"strings"
	"testing"

	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/cutkv/cutkv/proto/internalpb"
)

func TestDecode(t *testing.T) {
	want := &internalpb.Command{CutVersion: 3}
	data, err := proto.Marshal(want)
	if err != nil {
		t.Fatal(err)
	}
	cmd, ok, err := Decode(&raftpb.Entry{Index: proto.Uint64(5), Type: raftpb.EntryNormal.Enum(), Data: data})
	if err != nil || !ok || !proto.Equal(cmd, want) {
		t.Fatalf("Decode = %v, %v, %v; want %v", cmd, ok, err, want)
	}
	for name, e := range map[string]*raftpb.Entry{
		"a leader's empty entry": {Index: proto.Uint64(6), Type: raftpb.EntryNormal.Enum()},
		"a configuration change": {Index: proto.Uint64(7), Type: raftpb.EntryConfChange.Enum(), Data: []byte{8, 1}},
	} {
		if cmd, ok, err := Decode(e); cmd != nil || ok || err != nil {
			t.Errorf("%s: %v, %v, %v; want no command and no error", name, cmd, ok, err)
		}
	}
	if _, ok, err := Decode(&raftpb.Entry{Index: proto.Uint64(9), Type: raftpb.EntryNormal.Enum(), Data: []byte{0xff, 0xff}}); ok || err == nil || !strings.Contains(err.Error(), "entry 9") {
		t.Errorf("garbage: %v, %v; want an error naming entry 9", ok, err)
	}
}
