// Package command decodes the command a raft entry carries: the input of
// the partition and metadata state machines, and says what a command
// does that log readers need without a state machine's replay (which
// transactions an entry finishes, whether a record is a decision). The
// node's raft storage, the snapshot store's piece checks and the cut
// verifier all read entries, and none of them needs the others to do it.
package command

import (
	"fmt"

	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/cutkv/cutkv/proto/internalpb"
)

// Decode decodes the command of a normal entry; ok is false for an entry
// without one (raft's empty entries, configuration changes). An entry
// whose data does not decode is an error naming its index.
func Decode(e *raftpb.Entry) (cmd *internalpb.Command, ok bool, err error) {
	if e.GetType() != raftpb.EntryNormal || len(e.GetData()) == 0 {
		return nil, false, nil
	}
	cmd = &internalpb.Command{}
	if err := proto.Unmarshal(e.GetData(), cmd); err != nil {
		return nil, false, fmt.Errorf("entry %d: decode command: %w", e.GetIndex(), err)
	}
	return cmd, true, nil
}
