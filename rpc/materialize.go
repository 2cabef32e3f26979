package rpc

import (
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/cutkv/cutkv/checkpoint"
	"github.com/cutkv/cutkv/proto/internalpb"
	"github.com/cutkv/cutkv/proto/internalrpc"
	"github.com/cutkv/cutkv/proto/kvpb"
	"github.com/cutkv/cutkv/raftstore"
	"github.com/cutkv/cutkv/topology"
)

// checkpointNodeWait bounds one node's part of a Checkpoint.
const checkpointNodeWait = 50 * time.Second

// fileChunk is the size of one chunk of a streamed materialization.
const fileChunk = 1 << 20

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// SetStore lets the raft service serve materialization files and
// materialize on request.
func (s *RaftServer) SetStore(st *raftstore.Store) { s.store = st }

// FetchMaterialization streams a materialization file in chunks, each
// with its CRC32C (the file's own checksums are verified again by the
// receiver).
func (s *RaftServer) FetchMaterialization(req *internalpb.FetchMaterializationRequest, stream internalrpc.Raft_FetchMaterializationServer) error {
	if req.GetClusterId() != s.clusterID {
		return toStatus(fmt.Errorf("%w: cluster %x, this node is in %x", ErrWrongCluster, req.GetClusterId(), s.clusterID), "")
	}
	if s.store == nil {
		return toStatus(fmt.Errorf("%w: this node serves no materializations", ErrFailedPrecondition), "")
	}
	release := s.store.Pin(req.GetGroup(), req.GetIndex())
	defer release()
	path := s.store.MaterializationPath(req.GetGroup(), req.GetIndex())
	f, err := s.store.MaterializationFile(req.GetGroup(), req.GetIndex())
	if err != nil {
		return toStatus(fmt.Errorf("%w: %v", ErrFailedPrecondition, err), "")
	}
	defer f.Close()
	buf := make([]byte, fileChunk)
	for {
		n, err := io.ReadFull(f, buf)
		if n > 0 {
			if serr := stream.Send(&internalpb.FileChunk{Data: buf[:n], Crc: crc32.Checksum(buf[:n], castagnoli)}); serr != nil {
				return serr
			}
		}
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			return nil
		}
		if err != nil {
			return toStatus(fmt.Errorf("reading %s: %w", path, err), "")
		}
	}
}

// Materialize materializes the groups asked for (all this node holds when
// none are named).
func (s *RaftServer) Materialize(ctx context.Context, req *internalpb.MaterializeRequest) (*internalpb.MaterializeResponse, error) {
	if req.GetClusterId() != s.clusterID {
		return nil, toStatus(fmt.Errorf("%w: cluster %x, this node is in %x", ErrWrongCluster, req.GetClusterId(), s.clusterID), "")
	}
	if s.store == nil {
		return nil, toStatus(fmt.Errorf("%w: no store", ErrFailedPrecondition), "")
	}
	groups := req.GetGroups()
	if len(groups) > topology.MaxPartitions+1 {
		return nil, toStatus(fmt.Errorf("%w: groups: %d named, at most %d exist", ErrInvalidArgument, len(groups), topology.MaxPartitions+1), "")
	}
	for _, g := range groups {
		if _, ok := s.store.Status(g); !ok {
			return nil, toStatus(fmt.Errorf("%w: groups: this node holds no replica of group %d", ErrInvalidArgument, g), "")
		}
	}
	if len(groups) == 0 {
		groups = s.store.Groups()
	}
	out := &internalpb.MaterializeResponse{Groups: make([]*internalpb.GroupMaterialized, len(groups))}
	var wg sync.WaitGroup
	for i, g := range groups {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := &internalpb.GroupMaterialized{Group: g}
			idx, err := s.store.Materialize(ctx, g)
			for errors.Is(err, raftstore.ErrMaterializeBusy) && ctx.Err() == nil {
				// A background one is being written: wait for it, then
				// take a newer one.
				time.Sleep(20 * time.Millisecond)
				idx, err = s.store.Materialize(ctx, g)
			}
			r.Index = idx
			if err != nil {
				r.Error = err.Error()
			}
			out.Groups[i] = r
		}()
	}
	wg.Wait()
	return out, nil
}

// FetchMaterialization copies a materialization from member at addr
// into path: chunks are checked as they arrive, the whole file is
// verified before it is renamed into place, so path never names a
// partial or damaged file.
func FetchMaterialization(ctx context.Context, pool *Pool, member, addr string, clusterID, group, index uint64, path string) error {
	conn, err := pool.Conn(member, addr)
	if err != nil {
		return err
	}
	stream, err := internalrpc.NewRaftClient(conn).FetchMaterialization(ctx, &internalpb.FetchMaterializationRequest{ClusterId: clusterID, Group: group, Index: index})
	if err != nil {
		return err
	}
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	ok := false
	defer func() {
		if !ok {
			f.Close()
			os.Remove(tmp)
		}
	}()
	for {
		c, err := stream.Recv()
		if err == io.EOF {
			break
		}
		if err != nil {
			return err
		}
		if crc32.Checksum(c.GetData(), castagnoli) != c.GetCrc() {
			return fmt.Errorf("rpc: materialization %d@%d from %s: chunk checksum mismatch", group, index, addr)
		}
		if _, err := f.Write(c.GetData()); err != nil {
			return err
		}
	}
	if err := f.Sync(); err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	meta, err := checkpoint.Verify(tmp)
	if err != nil {
		return fmt.Errorf("rpc: materialization %d@%d from %s: %w", group, index, addr, err)
	}
	if meta.Partition != group || meta.Index != index {
		return fmt.Errorf("rpc: asked %s for materialization %d@%d, got %d@%d", addr, group, index, meta.Partition, meta.Index)
	}
	if err := os.Rename(tmp, path); err != nil {
		return err
	}
	ok = true
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// Checkpoint materializes every group on every node now.
func (s *ClusterServer) Checkpoint(ctx context.Context, req *kvpb.CheckpointRequest) (*kvpb.CheckpointResponse, error) {
	out := &kvpb.CheckpointResponse{Header: s.n.header(0)}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, m := range s.n.Layout.Members {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var resp *internalpb.MaterializeResponse
			var err error
			mreq := &internalpb.MaterializeRequest{ClusterId: s.n.Layout.ClusterID}
			// One hung node must not hold the others' answers: each is
			// bounded (materializing is seconds even for large partitions).
			nctx, cancel := context.WithTimeout(ctx, checkpointNodeWait)
			defer cancel()
			if conn, cerr := s.n.peerConn(m.ID); cerr != nil {
				err = cerr
			} else {
				resp, err = internalrpc.NewRaftClient(conn).Materialize(nctx, mreq)
			}
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				out.Groups = append(out.Groups, &kvpb.GroupCheckpoint{Node: m.ID, Error: err.Error(), NotAsked: true})
				return
			}
			for _, g := range resp.GetGroups() {
				out.Groups = append(out.Groups, &kvpb.GroupCheckpoint{Node: m.ID, Group: g.GetGroup(), MaterializedIndex: g.GetIndex(), Error: g.GetError()})
			}
		}()
	}
	wg.Wait()
	sortCheckpoint(out.Groups, s.n)
	return out, nil
}
