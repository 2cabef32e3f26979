package cut

import "encoding/binary"

// gossipPrefix marks a cut version broadcast over gossip (memberlist), so
// that other broadcasts and older or newer formats are told apart.
var gossipPrefix = []byte("cut1")

// gossipLen is the length of every broadcast EncodeGossip makes.
var gossipLen = len(gossipPrefix) + 8

// EncodeGossip is the gossip broadcast announcing version v (DESIGN.md,
// consistent cut rule 7): the prefix, then v as 8 big-endian bytes.
func EncodeGossip(v uint64) []byte {
	return binary.BigEndian.AppendUint64(append(make([]byte, 0, gossipLen), gossipPrefix...), v)
}

// DecodeGossip reads a broadcast EncodeGossip made; ok is false for
// anything else (another length, another prefix). The version it returns
// is only a claim: the node admits it like any version from outside.
func DecodeGossip(msg []byte) (v uint64, ok bool) {
	if len(msg) != gossipLen || string(msg[:len(gossipPrefix)]) != string(gossipPrefix) {
		return 0, false
	}
	return binary.BigEndian.Uint64(msg[len(gossipPrefix):]), true
}
