package version

import (
	"runtime/debug"
	"testing"
)

func TestFromBuildInfo(t *testing.T) {
	bi := &debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Path: "github.com/cutkv/cutkv", Version: "v0.3.0"},
		Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "0123456789abcdef0123"}, {Key: "vcs.modified", Value: "true"}}}
	got := fromBuildInfo(bi)
	want := Info{Version: "v0.3.0", Commit: "0123456789abcdef0123", Modified: true, GoVersion: "go1.26.0"}
	if got != want {
		t.Fatalf("fromBuildInfo = %+v, want %+v", got, want)
	}
	if s := got.String("kvnode"); s != "kvnode v0.3.0 commit 0123456789ab (modified) go1.26.0" {
		t.Fatalf("String = %q", s)
	}
	if v := fromBuildInfo(&debug.BuildInfo{GoVersion: "go1.26.0"}).Version; v != "(devel)" {
		t.Fatalf("no main version: %q, want (devel)", v)
	}
}

func TestOverride(t *testing.T) {
	base := Info{Version: "(devel)", GoVersion: "go1.26.0"}
	got := override(base, "v1.2.3-4-gabc", "abcdef", "false")
	if got.Version != "v1.2.3-4-gabc" || got.Commit != "abcdef" || got.Modified {
		t.Fatalf("override = %+v", got)
	}
	if got := override(Info{Commit: "x", Modified: true}, "", "", ""); got.Commit != "x" || !got.Modified {
		t.Fatalf("empty link-time values changed the build info: %+v", got)
	}
	if s := (Info{Version: "(devel)", GoVersion: "go1.26.0"}).String("kvctl"); s != "kvctl (devel) commit unknown go1.26.0" {
		t.Fatalf("String = %q", s)
	}
}
