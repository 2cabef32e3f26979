package partition

import (
	"bufio"
	"bytes"
	"io"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/cutkv/cutkv/cut"
)

// endFrame puts the end frame's payload (the frame counts) in e.buf.
func (e *imageEncoder) endFrame(n [4]uint64) {
	e.begin(frameEnd)
	for i, c := range n {
		e.varint(protowire.Number(i+1), c)
	}
}

// raw writes a frame whose payload (kind and fields) was built before.
func (e *imageEncoder) raw(payload []byte) {
	e.buf = append(e.buf[:0], payload...)
	e.end()
}

// flush writes what e buffered.
func (e *imageEncoder) flush() error {
	if e.err != nil {
		return e.err
	}
	return e.w.Flush()
}

func bufioWriter(w io.Writer) *bufio.Writer { return bufio.NewWriterSize(w, 64<<10) }

func bytesReader(b []byte) byteReader { return bytes.NewReader(b) }

func newEmptyProgressState() *cut.ProgressState { return cut.NewProgress().State() }
