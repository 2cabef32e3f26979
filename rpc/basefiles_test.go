package rpc

import (
	"errors"
	"strings"
	"testing"

	"github.com/cutkv/cutkv/checkpoint"
	"github.com/cutkv/cutkv/proto/internalpb"
	"github.com/cutkv/cutkv/snapshot"
)

// TestBaseFilesBounded: a replica's list of its base's files is taken
// only when every name is a checkpoint file's, sorted and unique, every
// size in bounds and every SHA-256 64 lowercase hex digits; each file's
// object is named by its content.
func TestBaseFilesBounded(t *testing.T) {
	sha := strings.Repeat("ab", 32)
	good := []*internalpb.BaseFile{{File: "000004.sst", Size: 10, Sha256: sha}, {File: "MANIFEST-000001", Size: 0, Sha256: sha}}
	got, err := baseFiles(good)
	if err != nil || len(got) != 2 || got[0].Name != snapshot.FileObjectName(sha) || got[1].Size != 0 {
		t.Fatalf("baseFiles(good) = %+v, %v", got, err)
	}
	for name, bad := range map[string][]*internalpb.BaseFile{
		"path":       {{File: "../x.sst", Size: 1, Sha256: sha}},
		"unsorted":   {good[1], good[0]},
		"duplicate":  {good[0], good[0]},
		"negative":   {{File: "1.sst", Size: -1, Sha256: sha}},
		"too large":  {{File: "1.sst", Size: checkpoint.MaxDirFileSize + 1, Sha256: sha}},
		"short sha":  {{File: "1.sst", Size: 1, Sha256: "ab"}},
		"not hex":    {{File: "1.sst", Size: 1, Sha256: strings.Repeat("zz", 32)}},
		"upper case": {{File: "1.sst", Size: 1, Sha256: strings.Repeat("AB", 32)}},
	} {
		if _, err := baseFiles(bad); !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("%s: %v, want ErrInvalidArgument", name, err)
		}
	}
	many := make([]*internalpb.BaseFile, checkpoint.MaxDirFiles+1)
	if _, err := baseFiles(many); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("%d files: %v, want ErrInvalidArgument", len(many), err)
	}
}
