// Package version says which build of cutkv is running: the module
// version, the commit it was built from and the Go toolchain, as
// `kvnode --version` and `kvctl version` print them.
//
// The values come from the binary's build information
// (runtime/debug.ReadBuildInfo). `go build` records the commit only when
// VCS stamping is on, which the Makefile turns off (GOFLAGS=-buildvcs=false,
// so that builds outside a checkout work): the Makefile sets Version,
// Commit and Modified with -ldflags -X instead, and those win.
package version

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"strconv"
)

// Set at link time by the Makefile (-ldflags "-X github.com/cutkv/cutkv/internal/version.Commit=…");
// empty: taken from the build information.
var (
	// Version is the release, e.g. v0.3.0 or the output of git describe.
	Version string
	// Commit is the full commit hash the binary was built from.
	Commit string
	// Modified is "true" when the work tree had uncommitted changes.
	Modified string
)

// Info describes one build.
type Info struct {
	// Version is the module version ("(devel)" for a build inside the
	// repository without -X Version).
	Version string `json:"version"`
	// Commit is the VCS revision, "" when unknown.
	Commit string `json:"commit"`
	// Modified says the commit had uncommitted changes on top of it.
	Modified bool `json:"modified"`
	// GoVersion is the toolchain that built the binary, e.g. go1.26.0.
	GoVersion string `json:"go_version"`
}

// Get returns this binary's build: the link-time values where set, else
// the build information's.
func Get() Info {
	info := Info{Version: "(devel)", GoVersion: runtime.Version()}
	if bi, ok := debug.ReadBuildInfo(); ok {
		info = fromBuildInfo(bi)
	}
	return override(info, Version, Commit, Modified)
}

// fromBuildInfo reads the main module's version and the vcs.* settings.
func fromBuildInfo(bi *debug.BuildInfo) Info {
	info := Info{Version: bi.Main.Version, GoVersion: bi.GoVersion}
	if info.Version == "" {
		info.Version = "(devel)"
	}
	if info.GoVersion == "" {
		info.GoVersion = runtime.Version()
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			info.Commit = s.Value
		case "vcs.modified":
			info.Modified = s.Value == "true"
		}
	}
	return info
}

// override applies the link-time values that are set.
func override(info Info, version, commit, modified string) Info {
	if version != "" {
		info.Version = version
	}
	if commit != "" {
		info.Commit = commit
	}
	if m, err := strconv.ParseBool(modified); err == nil {
		info.Modified = m
	}
	return info
}

// String renders the build on one line for program prog:
// "kvnode v0.3.0 commit 1a2b3c4d5e6f (modified) go1.26.0".
func (i Info) String(prog string) string {
	commit := i.Commit
	if commit == "" {
		commit = "unknown"
	}
	if len(commit) > 12 {
		commit = commit[:12]
	}
	s := fmt.Sprintf("%s %s commit %s", prog, i.Version, commit)
	if i.Modified {
		s += " (modified)"
	}
	return s + " " + i.GoVersion
}
