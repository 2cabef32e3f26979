package main

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"time"

	"github.com/cutkv/cutkv/bench/internal/benchconn"
	"github.com/cutkv/cutkv/client"
)

// digested is what digest prints.
type digested struct {
	Keys   int64   `json:"keys"`
	Bytes  int64   `json:"bytes"`
	SHA256 string  `json:"sha256"`
	TookS  float64 `json:"took_s"`
	First  string  `json:"first,omitempty"`
	Last   string  `json:"last,omitempty"`
	Prefix string  `json:"prefix,omitempty"`
}

// runDigest reads every key-value (or those under -prefix) in key order,
// a page at a time, and prints their count and a SHA-256 over the keys
// and values (each length-prefixed). Two clusters holding the same data
// print the same digest; a page is read atomically, the whole range is
// not, so it is meant for a cluster nobody writes to.
func runDigest(args []string) error {
	fs := benchconn.NewCommand("digest")
	prefix := fs.String("prefix", "", "only keys starting with this")
	page := fs.Int("page", 2000, "key-values per Scan")
	if err := fs.Parse(args); err != nil {
		return err
	}
	ctx := context.Background()
	c, err := client.New(ctx, benchconn.Split(fs.Endpoints())...)
	if err != nil {
		return err
	}
	defer c.Close()
	var start, end []byte
	if *prefix != "" {
		start = []byte(*prefix)
		end = prefixEnd(start)
	}
	t0 := time.Now()
	h := sha256.New()
	d := digested{Prefix: *prefix}
	var n [8]byte
	s := c.NewScanner(ctx, start, end, *page)
	for s.Next() {
		kv := s.KeyValue()
		for _, b := range [][]byte{kv.Key, kv.Value} {
			binary.BigEndian.PutUint64(n[:], uint64(len(b)))
			h.Write(n[:])
			h.Write(b)
		}
		if d.Keys == 0 {
			d.First = string(kv.Key)
		}
		d.Last = string(kv.Key)
		d.Keys++
		d.Bytes += int64(len(kv.Key) + len(kv.Value))
	}
	if err := s.Err(); err != nil {
		return err
	}
	d.SHA256 = hex.EncodeToString(h.Sum(nil))
	d.TookS = time.Since(t0).Seconds()
	printJSON(d)
	if d.Keys == 0 {
		return errors.New("no keys")
	}
	return nil
}

// prefixEnd returns the smallest key after every key starting with p
// (nil: none, p is all 0xff).
func prefixEnd(p []byte) []byte {
	end := append([]byte(nil), p...)
	for i := len(end) - 1; i >= 0; i-- {
		if end[i] < 0xff {
			end[i]++
			return end[:i+1]
		}
	}
	return nil
}
