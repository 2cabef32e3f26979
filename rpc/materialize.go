package rpc

import (
	"bufio"
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
	// Index 0 asks for the newest (a replica seeding itself at start).
	m, err := s.store.FindMaterialization(req.GetGroup(), req.GetIndex())
	if err != nil {
		return toStatus(fmt.Errorf("%w: %v", ErrFailedPrecondition, err), "")
	}
	g := req.GetGroup()
	var f io.ReadCloser
	path := s.store.MaterializationPath(g, m.Index)
	if m.Dir && req.GetCheckpoint() {
		path = s.store.CheckpointPath(g, m.Index)
		pr, pw := io.Pipe()
		go func() { pw.CloseWithError(checkpoint.WriteArchive(pw, path)) }()
		f = pr
	} else if f, err = s.store.MaterializationFile(g, m.Index); err != nil {
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

// FetchMaterialization copies a materialization from member at addr into
// path's directory (index 0: that member's newest, named by its index): chunks are checked as they arrive; a file is verified
// whole before it is renamed to path, an archive (dirOK: the receiver
// installs checkpoint directories) file by file before its directory is
// renamed to the checkpoint's name beside path. Neither name ever holds a
// partial or damaged materialization.
func FetchMaterialization(ctx context.Context, pool *Pool, member, addr string, clusterID, group, index uint64, path string, dirOK bool) error {
	conn, err := pool.Conn(member, addr)
	if err != nil {
		return err
	}
	stream, err := internalrpc.NewRaftClient(conn).FetchMaterialization(ctx, &internalpb.FetchMaterializationRequest{ClusterId: clusterID, Group: group, Index: index, Checkpoint: dirOK})
	if err != nil {
		return err
	}
	r := bufio.NewReaderSize(&chunkReader{stream: stream, what: fmt.Sprintf("materialization %d@%d from %s", group, index, addr)}, fileChunk)
	head, err := r.Peek(8)
	if err != nil {
		return fmt.Errorf("rpc: materialization %d@%d from %s: %w", group, index, addr, err)
	}
	dir := filepath.Dir(path)
	if checkpoint.IsArchive(head) {
		if !dirOK {
			return fmt.Errorf("rpc: materialization %d@%d from %s: a checkpoint archive, which this node did not ask for", group, index, addr)
		}
		tmp := filepath.Join(dir, checkpoint.Materialization{Partition: group, Index: index, Dir: true}.Name()+fmt.Sprintf(".tmp-%d", time.Now().UnixNano()))
		if _, _, err := checkpoint.ReadArchive(r, tmp, checkpoint.Materialization{Partition: group, Index: index}); err != nil {
			return fmt.Errorf("rpc: materialization %d@%d from %s: %w", group, index, addr, err)
		}
		return nil
	}
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
	if _, err := io.Copy(f, r); err != nil {
		return err
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
	if meta.Partition != group || (index != 0 && meta.Index != index) || meta.Index == 0 {
		return fmt.Errorf("rpc: asked %s for materialization %d@%d, got %d@%d", addr, group, index, meta.Partition, meta.Index)
	}
	if index == 0 {
		path = filepath.Join(dir, meta.Materialization().Name())
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

// chunkReader reads the data of a stream of FileChunks, checking each
// chunk's CRC-32C.
type chunkReader struct {
	stream interface {
		Recv() (*internalpb.FileChunk, error)
	}
	what string
	buf  []byte
}

func (c *chunkReader) Read(p []byte) (int, error) {
	for len(c.buf) == 0 {
		ch, err := c.stream.Recv()
		if err != nil {
			return 0, err
		}
		if crc32.Checksum(ch.GetData(), castagnoli) != ch.GetCrc() {
			return 0, fmt.Errorf("rpc: %s: chunk checksum mismatch", c.what)
		}
		c.buf = ch.GetData()
	}
	n := copy(p, c.buf)
	c.buf = c.buf[n:]
	return n, nil
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
