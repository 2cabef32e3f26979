package meta

import (
	"errors"
	"fmt"
	"io"

	"google.golang.org/protobuf/proto"

	"github.com/cutkv/cutkv/proto/internalpb"
	"github.com/cutkv/cutkv/proto/kvpb"
	"github.com/cutkv/cutkv/topology"
)

// ErrBadImage: a group 0 image that does not decode.
var ErrBadImage = errors.New("meta: bad image")

// maxImage bounds a group 0 image (layout plus KeepCuts cuts).
const maxImage = 256 << 20

type image struct{ m *internalpb.MetaImage }

func (im image) Applied() uint64 { return im.m.GetApplied() }

// Close releases nothing: the image is a copy.
func (im image) Close() {}

func (im image) Encode(w io.Writer) error {
	b, err := proto.Marshal(im.m)
	if err != nil {
		return fmt.Errorf("meta: encode image: %w", err)
	}
	_, err = w.Write(b)
	return err
}

// Materialize returns group 0's state at its applied index
// (raftstore.StateMachine). The state is small: it is copied.
func (s *State) Materialize() interface {
	Applied() uint64
	Encode(w io.Writer) error
	Close()
} {
	s.mu.RLock()
	defer s.mu.RUnlock()
	m := &internalpb.MetaImage{Applied: s.applied, LastCut: s.lastCut}
	if s.layout != nil {
		m.Layout = s.layout.Proto()
	}
	for _, c := range s.cuts {
		m.Cuts = append(m.Cuts, proto.Clone(c).(*kvpb.CutInfo))
	}
	return image{m}
}

// LoadImage replaces the state with the image read from r; a damaged
// image changes nothing.
func (s *State) LoadImage(r io.Reader) error {
	b, err := io.ReadAll(io.LimitReader(r, maxImage+1))
	if err != nil {
		return err
	}
	if len(b) > maxImage {
		return fmt.Errorf("%w: larger than %d bytes", ErrBadImage, maxImage)
	}
	m := &internalpb.MetaImage{}
	if err := proto.Unmarshal(b, m); err != nil {
		return fmt.Errorf("%w: %v", ErrBadImage, err)
	}
	var l *topology.Layout
	if m.GetLayout() != nil {
		if l, err = topology.FromProto(m.GetLayout()); err != nil {
			return fmt.Errorf("%w: layout: %v", ErrBadImage, err)
		}
	}
	for i, c := range m.GetCuts() {
		if c.GetVersion() == 0 || c.GetVersion() > m.GetLastCut() || (i > 0 && c.GetVersion() <= m.GetCuts()[i-1].GetVersion()) {
			return fmt.Errorf("%w: cut versions out of order at %d", ErrBadImage, i)
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.layout, s.applied, s.cuts, s.lastCut = l, m.GetApplied(), m.GetCuts(), m.GetLastCut()
	s.changed.Notify()
	return nil
}
