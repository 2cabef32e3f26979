package snapshot

import (
	"context"
	"io"
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
	it := s.bucket.List(&blob.ListOptions{Delimiter: "/"})
	var out []uint64
	for {
		o, err := it.Next(ctx)
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, s.wrap("listing the clusters", err)
		}
		name, ok := strings.CutSuffix(o.Key, "/")
		if !o.IsDir || !ok {
			continue
		}
		id, err := parseClusterHex(name)
		if err != nil || id == 0 {
			continue // not a cluster's prefix
		}
		has, err := s.hasManifest(ctx, name+"/"+manifestsDir)
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

// hasManifest says whether prefix (a cluster's manifests/) holds an
// object named <id>.json with a valid snapshot id.
func (s *Store) hasManifest(ctx context.Context, prefix string) (bool, error) {
	it := s.bucket.List(&blob.ListOptions{Prefix: prefix})
	for {
		o, err := it.Next(ctx)
		if err == io.EOF {
			return false, nil
		}
		if err != nil {
			return false, s.wrap("listing "+prefix, err)
		}
		id, ok := strings.CutSuffix(strings.TrimPrefix(o.Key, prefix), jsonExt)
		if !o.IsDir && ok && validateID(id) == nil {
			return true, nil
		}
	}
}
