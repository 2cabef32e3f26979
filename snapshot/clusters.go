package snapshot

import (
	"context"
	"io"
	"os"
	"slices"
	"strings"

	"gocloud.dev/blob"
)

// Clusters lists the clusters that have snapshots in the store at url: the
// top-level prefixes that are a cluster id (16 lowercase hex digits) and
// hold at least one manifest, in increasing order. It is how a machine
// with nothing but the URL finds what it can restore; OpenStore then
// opens one of them. The URL is opened as OpenStore opens it (same
// schemes and errors). It lists the bucket's top level and each
// cluster's manifests/, and reads no manifest (Store.List does).
func Clusters(ctx context.Context, url string) ([]uint64, error) {
	// The cluster id only scopes the Store's own calls; the listing below
	// goes to the bucket directly.
	s, err := OpenStore(ctx, url, 1)
	if err != nil {
		return nil, err
	}
	defer s.Close()
	names, err := s.topDirs(ctx)
	if err != nil {
		return nil, s.wrap(OpList, "listing the clusters", err)
	}
	var out []uint64
	for _, name := range names {
		id, err := parseClusterHex(name)
		if err != nil || id == 0 {
			continue // not a cluster's prefix
		}
		has, err := s.hasManifest(ctx, name+"/")
		if err != nil {
			return nil, err
		}
		if has {
			out = append(out, id)
		}
	}
	slices.Sort(out)
	return out, nil
}

// topDirs lists the bucket's top-level "directories". A directory store
// is read directly, for the reason listRaw gives.
func (s *Store) topDirs(ctx context.Context) ([]string, error) {
	if s.fileDir != "" {
		ents, err := os.ReadDir(s.fileDir)
		if err != nil {
			return nil, err
		}
		var out []string
		for _, e := range ents {
			if e.IsDir() {
				out = append(out, e.Name())
			}
		}
		return out, nil
	}
	it := s.bucket.List(&blob.ListOptions{Delimiter: "/"})
	var out []string
	for {
		o, err := it.Next(ctx)
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
		if name, ok := strings.CutSuffix(o.Key, "/"); o.IsDir && ok {
			out = append(out, name)
		}
	}
}

// hasManifest says whether the cluster under prefix ("<hex id>/") holds
// a manifest: an object manifests/<id>.json with a valid snapshot id.
func (s *Store) hasManifest(ctx context.Context, prefix string) (bool, error) {
	other := *s
	other.prefix = prefix
	names, err := other.listNames(ctx, manifestsDir)
	if err != nil {
		return false, err
	}
	for _, n := range names {
		if id, ok := strings.CutSuffix(n, jsonExt); ok && validateID(id) == nil {
			return true, nil
		}
	}
	return false, nil
}
