package ui

import (
	"context"
	"time"

	"github.com/cutkv/cutkv/proto/kvpb"
)

// snapshotCache holds the last read of the snapshot store, and the
// objects of each snapshot listed (a snapshot never changes, so each is
// read once, while it is listed).
type snapshotCache struct {
	at      time.Time
	last    Snapshots
	details map[string]*snapshotDetail // by snapshot id; only ids of the last listing
}

// snapshotDetail is the objects one snapshot references, by name, with
// their sizes.
type snapshotDetail struct {
	objects map[string]int64
}

// get returns the snapshots, reading the store when the last read is
// older than cfg.SnapshotRefresh.
func (c *snapshotCache) get(ctx context.Context, cfg *Config, now time.Time) Snapshots {
	if !c.at.IsZero() && now.Sub(c.at) < cfg.SnapshotRefresh {
		return c.last
	}
	ctx, cancel := context.WithTimeout(ctx, cfg.SnapshotTimeout)
	defer cancel()
	c.at = now
	out := Snapshots{Items: []Snapshot{}, UpdatedUnixMs: now.UnixMilli()}
	resp, err := cfg.Cluster.ListSnapshots(ctx, &kvpb.ListSnapshotsRequest{})
	if err != nil {
		out.Error = errText("list snapshots", err)
		c.last = out
		return out
	}
	out.Store = resp.GetStore()
	list := resp.GetSnapshots() // oldest cut first
	// The newest MaxSnapshots, and the one before them: the first one
	// listed is compared with its own parent.
	from := max(0, len(list)-MaxSnapshots-1)
	list = list[from:]
	keep := make(map[string]*snapshotDetail, len(list))
	var prev *kvpb.SnapshotInfo
	var prevDetail *snapshotDetail
	for i, s := range list {
		d, derr := c.detail(ctx, cfg, s.GetId())
		if d != nil {
			keep[s.GetId()] = d
		}
		if i > 0 || from == 0 {
			item := Snapshot{
				ID: s.GetId(), CutVersion: s.GetCutVersion(), TimeUnixMs: s.GetTimeUnixMs(),
				Partitions: s.GetPartitionCount(), Objects: s.GetObjects(), TotalBytes: s.GetTotalBytes(),
			}
			switch {
			case derr != nil:
				item.DetailError = errText("show snapshot "+s.GetId(), derr)
			case prev != nil && prevDetail == nil:
				item.Parent = prev.GetId()
				item.DetailError = "the parent's objects could not be read"
			default:
				if prev != nil {
					item.Parent = prev.GetId()
				}
				newObjs, newBytes, shared := 0, int64(0), 0
				for name, size := range d.objects {
					if prevDetail != nil && hasObject(prevDetail, name) {
						shared++
						continue
					}
					newObjs++
					newBytes += size
				}
				item.NewObjects, item.NewBytes, item.SharedObjects = &newObjs, &newBytes, &shared
			}
			out.Items = append(out.Items, item)
		}
		prev, prevDetail = s, d
	}
	c.details = keep
	c.last = out
	return out
}

func hasObject(d *snapshotDetail, name string) bool {
	_, ok := d.objects[name]
	return ok
}

// detail returns the objects of snapshot id, from the cache or the store.
func (c *snapshotCache) detail(ctx context.Context, cfg *Config, id string) (*snapshotDetail, error) {
	if d := c.details[id]; d != nil {
		return d, nil
	}
	resp, err := cfg.Cluster.GetSnapshot(ctx, &kvpb.GetSnapshotRequest{Id: id})
	if err != nil {
		return nil, err
	}
	d := &snapshotDetail{objects: map[string]int64{}}
	for _, p := range resp.GetSnapshot().GetPartitions() {
		// As snapshot.Manifest.Objects counts them: the base object and,
		// for a checkpoint base, each of its files.
		if p.GetBaseName() != "" {
			d.objects[p.GetBaseName()] = p.GetBaseSize()
		}
		for _, f := range p.GetBaseFiles() {
			d.objects[f.GetName()] = f.GetSize()
		}
		for _, pc := range p.GetPieces() {
			d.objects[pc.GetName()] = pc.GetSize()
		}
	}
	return d, nil
}
