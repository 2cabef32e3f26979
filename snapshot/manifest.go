package snapshot

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/cutkv/cutkv/checkpoint"
)

// ManifestVersion is the newest manifest format this binary reads.
// Version 2 added checkpoint bases (Base.Files); a manifest without one is
// written as version 1, which binaries from before it read too.
const ManifestVersion = 2

// formatFor returns the manifest format m needs: 2 with a checkpoint
// base, else 1.
func formatFor(m *Manifest) int {
	for _, p := range m.Partitions {
		if p.Base != nil && len(p.Base.Files) > 0 {
			return 2
		}
	}
	return 1
}

// maxIDLen bounds a snapshot id.
const maxIDLen = 128

// Manifest describes one snapshot: a completed cut and, per partition, a
// checkpoint handle (DESIGN.md, "Snapshots"). It is stored as JSON under
// manifests/<ID>.json; the manifests of a cluster are its catalogue.
type Manifest struct {
	// Format is the manifest format version; PutManifest fills in the
	// lowest one that holds it when it is 0 (2 with checkpoint bases, else
	// 1). A reader refuses a higher one than it knows.
	Format int `json:"format"`
	// ID names the snapshot: 1 to 128 of [A-Za-z0-9._-], not starting
	// with a dot. IDForCut gives the usual one.
	ID string `json:"id"`
	// Cluster is the cluster's id in hex, 16 digits; PutManifest fills it
	// in when empty and refuses another cluster's.
	Cluster string `json:"cluster"`
	// CutVersion is the completed cut v the snapshot is taken at.
	CutVersion uint64 `json:"cut_version"`
	// Time is when the cut completed (or the snapshot was planned); Prune's
	// keepWithin counts from it.
	Time time.Time `json:"time"`
	// PartitionCount is the cluster's number of partitions; Partitions
	// holds one handle for each of 1 … PartitionCount.
	PartitionCount uint32 `json:"partition_count"`
	// KeyHash names the function that maps keys to partitions
	// (keyspace.HashName); a restore refuses one it does not know.
	KeyHash string `json:"key_hash"`
	// Partitions are the handles, in partition order.
	Partitions []Partition `json:"partitions"`
}

// Partition is one partition's handle in a snapshot: its base
// materialization at index m (or none: the empty partition at 0) and the
// changelog pieces that cover the entries m+1 … End without gaps.
type Partition struct {
	// Partition is the partition's id, which is its raft group.
	Partition uint64 `json:"partition"`
	// Pos is pos_p(v): the first entry of the partition's log with cut
	// version >= v. The state at the cut is the base plus the entries
	// before Pos (DESIGN.md, consistent cut rule 5); Base.Index < Pos.
	Pos uint64 `json:"pos"`
	// End is the index of the CutFinish(v) entry that closed the cut in
	// the partition (its finish index), which carries the before set, or
	// Pos itself when nothing was active there and the cut closed at its
	// position with an empty before set (rule 6); the pieces end there.
	// Pos <= End.
	End uint64 `json:"end"`
	// Base is the materialization the chain starts from; nil: none.
	Base *Base `json:"base,omitempty"`
	// Pieces cover Base.Index+1 … End in order.
	Pieces []Piece `json:"pieces"`
}

// Object is a stored piece as a manifest records it.
type Object struct {
	// Name is the piece's object name under pieces/.
	Name string `json:"name"`
	// Size is its length in bytes.
	Size int64 `json:"size"`
	// SHA256 is the SHA-256 of the whole object, lowercase hex.
	SHA256 string `json:"sha256"`
}

// Base is a partition's base materialization in a manifest: the state of
// the partition at Index, named by checkpoint.Materialization.Name. It is
// either a materialization file (pNNNN-<index>.mat, Files empty), or a
// checkpoint directory (pNNNN-<index>.ckpt): the Object is then the
// directory's manifest (checkpoint.ManifestName) and Files its files,
// each stored once under the name of its content (FileObjectName) and
// shared by every base that holds it.
type Base struct {
	Object
	Index uint64     `json:"index"`
	Files []BaseFile `json:"files,omitempty"`
}

// BaseFile is one file of a checkpoint base: its name in the directory and
// the object holding it.
type BaseFile struct {
	File string `json:"file"`
	Object
}

// fileObjectPrefix starts the object name of a checkpoint file.
const fileObjectPrefix = "f-"

// FileObjectName is the object name of a checkpoint file whose SHA-256 is
// sha (lowercase hex): a file's identity is its content, so the same file
// uploaded by two snapshots is one object, and replicas' files, which
// differ byte for byte, never collide.
func FileObjectName(sha string) string { return fileObjectPrefix + sha }

// isFileObjectName says whether name is a FileObjectName.
func isFileObjectName(name string) bool {
	sha, ok := strings.CutPrefix(name, fileObjectPrefix)
	return ok && ValidSHA256(sha)
}

// ValidSHA256 says whether s is a SHA-256 as manifests write it: 64
// lowercase hex digits.
func ValidSHA256(s string) bool {
	b, err := hex.DecodeString(s)
	return err == nil && len(b) == 32 && hex.EncodeToString(b) == s
}

// Piece is a changelog piece a partition's handle uses: the stored piece
// holds entries Lo … Hi, the handle uses From … Hi (From > Lo when the
// base is newer than the piece's start; restore skips the entries below
// From, which the base holds).
type Piece struct {
	Object
	Lo   uint64 `json:"lo"`
	Hi   uint64 `json:"hi"`
	From uint64 `json:"from"`
}

// IDForCut returns the usual id of the snapshot at cut v:
// "cut-" and v in decimal, twenty digits, so that ids sort like versions.
func IDForCut(v uint64) string { return fmt.Sprintf("cut-%020d", v) }

// ResolveID returns the snapshot id a user means by arg: a cut number in
// decimal ("7", "0042") names the snapshot of that cut, IDForCut(7);
// anything else is taken as the id itself. Snapshots get their ids from
// the cut they were taken at, so an id of digits alone never names
// anything else.
func ResolveID(arg string) string {
	if arg == "" || strings.TrimLeft(arg, "0123456789") != "" {
		return arg
	}
	v, err := strconv.ParseUint(arg, 10, 64)
	if err != nil {
		return arg // too large for a cut version: let the id rules say so
	}
	return IDForCut(v)
}

// BaseIndex returns m, the index of the base (0 without one).
func (p *Partition) BaseIndex() uint64 {
	if p.Base == nil {
		return 0
	}
	return p.Base.Index
}

// Objects returns every stored object the manifest references: the
// partitions' bases and pieces, each once, sorted by name.
func (m *Manifest) Objects() []Object {
	seen := map[string]bool{}
	var out []Object
	add := func(o Object) {
		if !seen[o.Name] {
			seen[o.Name] = true
			out = append(out, o)
		}
	}
	for i := range m.Partitions {
		p := &m.Partitions[i]
		if p.Base != nil {
			add(p.Base.Object)
			for _, f := range p.Base.Files {
				add(f.Object)
			}
		}
		for _, pc := range p.Pieces {
			add(pc.Object)
		}
	}
	slices.SortFunc(out, func(a, b Object) int {
		switch {
		case a.Name < b.Name:
			return -1
		case a.Name > b.Name:
			return 1
		}
		return 0
	})
	return out
}

// Validate checks the manifest's shape: every field set, one handle per
// partition in order, names that match their partition and ranges, and
// per partition a chain of pieces from the base to End without gap or
// overlap (a gap is a *CheckError wrapping ErrIncomplete, naming the
// piece that would fill it).
// Other faults wrap ErrInvalid. It reads nothing from a store.
func (m *Manifest) Validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: manifest %q: %s", ErrInvalid, m.ID, fmt.Sprintf(format, args...))
	}
	if m.Format < 1 || m.Format > ManifestVersion {
		return bad("format %d (this binary reads 1 to %d)", m.Format, ManifestVersion)
	}
	if need := formatFor(m); m.Format < need {
		return bad("format %d, but it has checkpoint bases (format %d)", m.Format, need)
	}
	if err := validateID(m.ID); err != nil {
		return err
	}
	if _, err := parseClusterHex(m.Cluster); err != nil {
		return bad("%v", err)
	}
	switch {
	case m.CutVersion == 0:
		return bad("cut version 0")
	case m.Time.IsZero():
		return bad("no time")
	case m.PartitionCount == 0:
		return bad("partition count 0")
	case m.KeyHash == "":
		return bad("no key-hash function")
	case len(m.Partitions) != int(m.PartitionCount):
		return bad("%d partition handles for %d partitions", len(m.Partitions), m.PartitionCount)
	}
	for i := range m.Partitions {
		p := &m.Partitions[i]
		if want := uint64(i) + 1; p.Partition != want {
			return bad("handle %d is of partition %d, want %d (one per partition, in order)", i, p.Partition, want)
		}
		if err := p.validate(m.ID); err != nil {
			return err
		}
	}
	return nil
}

func (p *Partition) validate(id string) error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: manifest %q: partition %d: %s", ErrInvalid, id, p.Partition, fmt.Sprintf(format, args...))
	}
	m := p.BaseIndex()
	if b := p.Base; b != nil {
		want := checkpoint.Materialization{Partition: p.Partition, Index: b.Index, Dir: len(b.Files) > 0}
		if b.Name != want.Name() {
			return bad("base %q should be named %q", b.Name, want.Name())
		}
		if err := b.Object.validate(); err != nil {
			return bad("%v", err)
		}
		if len(b.Files) > checkpoint.MaxDirFiles {
			return bad("base %s lists %d files, at most %d", b.Name, len(b.Files), checkpoint.MaxDirFiles)
		}
		for i, f := range b.Files {
			if !checkpoint.ValidFileName(f.File) || (i > 0 && b.Files[i-1].File >= f.File) {
				return bad("base %s: file %q: not a checkpoint file's name, or names not sorted and unique", b.Name, f.File)
			}
			if f.Name != FileObjectName(f.SHA256) {
				return bad("base %s: file %s is stored as %q, want %q (the name of its content)", b.Name, f.File, f.Name, FileObjectName(f.SHA256))
			}
			if err := f.Object.validateSHA(); err != nil || f.Size < 0 || f.Size > checkpoint.MaxDirFileSize {
				return bad("base %s: file %s: size %d, %v", b.Name, f.File, f.Size, err)
			}
		}
	}
	if m >= p.Pos || p.Pos > p.End {
		return bad("needs base %d < pos %d <= end %d", m, p.Pos, p.End)
	}
	next := m + 1
	for _, pc := range p.Pieces {
		if want := PieceName(p.Partition, pc.Lo, pc.Hi); pc.Name != want || pc.Lo == 0 || pc.Lo > pc.Hi {
			return bad("piece %q with range [%d, %d] should be named %q", pc.Name, pc.Lo, pc.Hi, want)
		}
		if err := pc.Object.validate(); err != nil {
			return bad("%v", err)
		}
		if pc.From < pc.Lo || pc.From > pc.Hi {
			return bad("piece %s used from %d, outside it", pc.Name, pc.From)
		}
		if pc.From > next {
			return p.gap(id, next, pc.From-1)
		}
		if pc.From < next {
			return bad("piece %s used from %d overlaps the chain, which is at %d", pc.Name, pc.From, next)
		}
		if pc.Hi > p.End {
			return bad("piece %s reaches past the end %d", pc.Name, p.End)
		}
		next = pc.Hi + 1
	}
	if next <= p.End {
		return p.gap(id, next, p.End)
	}
	return nil
}

// gap reports entries lo … hi missing from the chain, naming the piece
// that would hold them.
func (p *Partition) gap(id string, lo, hi uint64) error {
	return &CheckError{
		Snapshot: id, Partition: p.Partition, Piece: PieceName(p.Partition, lo, hi),
		Err: fmt.Errorf("%w: no piece holds entries %d … %d (base %d, end %d)", ErrIncomplete, lo, hi, p.BaseIndex(), p.End),
	}
}

func (o Object) validate() error {
	if o.Size <= 0 {
		return fmt.Errorf("piece %s: size %d", o.Name, o.Size)
	}
	return o.validateSHA()
}

// validateSHA checks the object's SHA-256 (a checkpoint file may be
// empty: Pebble's markers are).
func (o Object) validateSHA() error {
	if !ValidSHA256(o.SHA256) {
		return fmt.Errorf("piece %s: SHA-256 %q is not 64 lowercase hex digits", o.Name, o.SHA256)
	}
	return nil
}

// validateID checks a snapshot id (see Manifest.ID).
func validateID(id string) error {
	if id == "" || len(id) > maxIDLen || id[0] == '.' {
		return fmt.Errorf("%w: snapshot id %q: want 1 to %d of [A-Za-z0-9._-], not starting with '.'", ErrInvalid, id, maxIDLen)
	}
	for _, c := range []byte(id) {
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-'
		if !ok {
			return fmt.Errorf("%w: snapshot id %q: character %q (want [A-Za-z0-9._-])", ErrInvalid, id, c)
		}
	}
	return nil
}

func clusterHex(id uint64) string { return fmt.Sprintf("%016x", id) }

func parseClusterHex(s string) (uint64, error) {
	b, err := hex.DecodeString(s)
	if err != nil || len(b) != 8 || hex.EncodeToString(b) != s {
		return 0, fmt.Errorf("cluster %q is not 16 lowercase hex digits", s)
	}
	var v uint64
	for _, c := range b {
		v = v<<8 | uint64(c)
	}
	return v, nil
}

// encodeManifest renders m as indented JSON with a final newline.
func encodeManifest(m *Manifest) ([]byte, error) {
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

// decodeManifest parses a stored manifest: ErrVersion for a newer format
// (checked before anything else, so a newer layout is reported as such),
// ErrCorrupt for bytes that are not a manifest, then Validate.
func decodeManifest(name string, b []byte) (*Manifest, error) {
	var probe struct {
		Format *int `json:"format"`
	}
	if err := json.Unmarshal(b, &probe); err != nil {
		return nil, fmt.Errorf("%w: manifest %s is not JSON: %v", ErrCorrupt, name, err)
	}
	switch {
	case probe.Format == nil:
		return nil, fmt.Errorf("%w: manifest %s has no format version", ErrCorrupt, name)
	case *probe.Format > ManifestVersion:
		return nil, fmt.Errorf("%w: manifest %s has format version %d; this binary reads version %d",
			ErrVersion, name, *probe.Format, ManifestVersion)
	}
	d := json.NewDecoder(bytes.NewReader(b))
	d.DisallowUnknownFields()
	m := &Manifest{}
	if err := d.Decode(m); err != nil {
		return nil, fmt.Errorf("%w: manifest %s: %v", ErrCorrupt, name, err)
	}
	if d.More() {
		return nil, fmt.Errorf("%w: manifest %s: data after the manifest", ErrCorrupt, name)
	}
	if err := m.Validate(); err != nil {
		return nil, err
	}
	return m, nil
}
