package main

import (
	"context"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/cutkv/cutkv/client"
)

func newPutCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "put KEY [VALUE]",
		Short: "Set a key's value (read from stdin when VALUE is omitted)",
		Args:  cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			key := []byte(args[0])
			var value []byte
			if len(args) == 2 {
				value = []byte(args[1])
			} else {
				v, err := io.ReadAll(io.LimitReader(g.stdin, client.MaxValueSize+1))
				if err != nil {
					return usagef("reading the value from stdin: %v", err)
				}
				value = v
			}
			return g.withClient(cmd, func(ctx context.Context, c *client.Client) error {
				var h client.Header
				if err := c.Put(ctx, key, value, client.WithHeader(&h)); err != nil {
					return err
				}
				if g.json() {
					return writeJSON(cmd.OutOrStdout(), jsonPut{Header: toJSONHeader(h)})
				}
				_, err := fmt.Fprintln(cmd.OutOrStdout(), "OK")
				return err
			})
		},
	}
}

func newGetCmd(g *globals) *cobra.Command {
	var (
		printKey bool
		prefix   bool
		limit    int
		keysOnly bool
	)
	cmd := &cobra.Command{
		Use:   "get KEY",
		Short: "Print a key's value (exit 1 if absent); --prefix: every key that starts with KEY",
		Long: `Print a key's value; exit 1 if the key does not exist.
--prefix (etcdctl's) prints every key that starts with KEY, each followed
by its value, as 'kvctl scan KEY END' over the prefix's range does (exit 0
also when there is none; --limit and --keys-only as for scan).`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			key := []byte(args[0])
			if prefix {
				if limit < 0 {
					return usagef("invalid --limit %d: must be 0 (no limit) or more", limit)
				}
				return g.printScan(cmd, key, prefixEnd(key), limit, keysOnly)
			}
			if cmd.Flags().Changed("limit") || keysOnly {
				return usagef("--limit and --keys-only go with --prefix (or use 'kvctl scan')")
			}
			return g.withClient(cmd, func(ctx context.Context, c *client.Client) error {
				var h client.Header
				kv, err := c.Get(ctx, key, client.WithHeader(&h))
				found := err == nil
				if err != nil && !errorsIsNotFound(err) {
					return err
				}
				out := cmd.OutOrStdout()
				if g.json() {
					var kvs []client.KeyValue
					if found {
						kvs = append(kvs, kv)
					}
					if werr := writeJSON(out, jsonKVs{Header: toJSONHeader(h), KVs: toJSONKVs(kvs, false), Count: len(kvs)}); werr != nil {
						return werr
					}
					return err
				}
				if !found {
					return err
				}
				if printKey {
					if err := writeLine(out, kv.Key); err != nil {
						return err
					}
				}
				return writeLine(out, kv.Value)
			})
		},
	}
	cmd.Flags().BoolVar(&printKey, "print-key", false, "print the key on a line before the value")
	cmd.Flags().BoolVar(&prefix, "prefix", false, "print every key that starts with KEY, with its value (a scan over the prefix)")
	cmd.Flags().IntVar(&limit, "limit", 0, "with --prefix: print at most this many keys (0: all)")
	cmd.Flags().BoolVar(&keysOnly, "keys-only", false, "with --prefix: print keys without values")
	return cmd
}

func newDelCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:     "del KEY",
		Aliases: []string{"delete"},
		Short:   "Delete a key and print how many keys were deleted (0 or 1)",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			key := []byte(args[0])
			return g.withClient(cmd, func(ctx context.Context, c *client.Client) error {
				var h client.Header
				deleted, err := c.Delete(ctx, key, client.WithHeader(&h))
				if err != nil {
					return err
				}
				n := 0
				if deleted {
					n = 1
				}
				if g.json() {
					return writeJSON(cmd.OutOrStdout(), jsonDel{Header: toJSONHeader(h), Deleted: n})
				}
				_, err = fmt.Fprintln(cmd.OutOrStdout(), n)
				return err
			})
		},
	}
}

// scanPage is the number of keys kvctl asks for per request.
const scanPage = 1000

func newScanCmd(g *globals) *cobra.Command {
	var (
		limit    int
		keysOnly bool
	)
	cmd := &cobra.Command{
		Use:   "scan [FROM [TO]]",
		Short: "Print the keys FROM <= key < TO in key order, each followed by its value",
		Long: `Print the keys FROM <= key < TO in key order, each line followed by a
line with its value. Without FROM the scan starts at the first key; without
TO it runs to the last. --limit bounds the number of keys (0: no bound).`,
		Args: cobra.RangeArgs(0, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if limit < 0 {
				return usagef("invalid --limit %d: must be 0 (no limit) or more", limit)
			}
			var from, to []byte
			if len(args) > 0 {
				from = []byte(args[0])
			}
			if len(args) > 1 {
				to = []byte(args[1])
			}
			return g.printScan(cmd, from, to, limit, keysOnly)
		},
	}
	cmd.Flags().IntVar(&limit, "limit", 0, "print at most this many keys (0: all)")
	cmd.Flags().BoolVar(&keysOnly, "keys-only", false, "print keys without values")
	return cmd
}

// printScan prints the keys of [from, to) (to nil: to the last key), at
// most limit of them (0: all), for scan and get --prefix.
func (g *globals) printScan(cmd *cobra.Command, from, to []byte, limit int, keysOnly bool) error {
	return g.withClient(cmd, func(ctx context.Context, c *client.Client) error {
		var h client.Header
		opts := []client.Option{client.WithHeader(&h)}
		if keysOnly {
			opts = append(opts, client.WithKeysOnly())
		}
		kvs, more, err := scan(ctx, c, from, to, limit, opts)
		if err != nil {
			return err
		}
		out := cmd.OutOrStdout()
		if g.json() {
			return writeJSON(out, jsonKVs{Header: toJSONHeader(h), KVs: toJSONKVs(kvs, keysOnly), Count: len(kvs), More: &more})
		}
		for _, kv := range kvs {
			if err := writeLine(out, kv.Key); err != nil {
				return err
			}
			if !keysOnly {
				if err := writeLine(out, kv.Value); err != nil {
					return err
				}
			}
		}
		return nil
	})
}

// scan reads up to limit (0: all) key-values of [from, to) page by page;
// more reports that keys remain after the last one returned.
func scan(ctx context.Context, c *client.Client, from, to []byte, limit int, opts []client.Option) (kvs []client.KeyValue, more bool, err error) {
	kvs = []client.KeyValue{}
	start := from
	for {
		n := scanPage
		if limit > 0 {
			n = min(n, limit-len(kvs))
		}
		page, m, err := c.Scan(ctx, start, to, n, opts...)
		if err != nil {
			return nil, false, err
		}
		kvs, more = append(kvs, page...), m
		if !more || len(page) == 0 || (limit > 0 && len(kvs) >= limit) {
			return kvs, more, nil
		}
		last := page[len(page)-1].Key
		start = append(append(make([]byte, 0, len(last)+1), last...), 0)
	}
}

func writeLine(w io.Writer, b []byte) error {
	if _, err := w.Write(b); err != nil {
		return err
	}
	_, err := io.WriteString(w, "\n")
	return err
}
