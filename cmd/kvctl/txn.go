package main

import (
	"context"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/cutkv/cutkv/client"
)

func newTxnCmd(g *globals) *cobra.Command {
	var (
		file   string
		maxOps int
	)
	cmd := &cobra.Command{
		Use:   "txn [-f FILE]",
		Short: "Run a transaction read from stdin (or FILE): compares, then success ops, then failure ops",
		Long: `Run a transaction read from stdin, or from FILE with -f. The text is three
sections separated by single blank lines: compares, success ops (run when
every compare holds), failure ops (run otherwise). '#' starts a comment.

  ver(KEY) OP N           compare KEY's version (0: absent); OP is = != < >
  val(KEY) OP VALUE       compare KEY's value (false when KEY is absent)
  put KEY VALUE
  get KEY
  del KEY
  scan FROM [TO] [--limit N]

KEY and VALUE are bare words or double-quoted Go strings ("a b", "\x00").
Prints SUCCESS or FAILURE, then one result per op of the branch that ran:
put: OK; del: the number deleted; get: key and value lines (nothing when
absent); scan: key and value lines. Exit 0 whichever branch ran; exit 5
when the transaction kept conflicting with others until --timeout.
See docs/cli.md for the full format.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if maxOps <= 0 {
				return usagef("invalid --max-ops %d: must be positive", maxOps)
			}
			src, name, err := readTxnSource(file, g.stdin)
			if err != nil {
				return usagef("%v", err)
			}
			spec, err := parseTxn(src)
			if err != nil {
				return usagef("%s: %v", name, err)
			}
			g.maxTxnOps = maxOps
			return g.withClient(cmd, func(ctx context.Context, c *client.Client) error {
				resp, err := c.Txn(ctx).If(spec.cmps...).Then(spec.ops(0)...).Else(spec.ops(1)...).Commit()
				if err != nil {
					return err
				}
				if g.json() {
					return writeJSON(cmd.OutOrStdout(), toJSONTxn(resp))
				}
				return writeTxnText(cmd.OutOrStdout(), resp)
			})
		},
	}
	cmd.Flags().StringVarP(&file, "file", "f", "", "read the transaction from FILE instead of stdin ('-': stdin)")
	cmd.Flags().IntVar(&maxOps, "max-ops", client.DefaultMaxTxnOps, "most compares, and ops per branch, to accept (the servers' limit)")
	return cmd
}

// readTxnSource reads the transaction text and names its source for
// messages.
func readTxnSource(file string, stdin io.Reader) ([]byte, string, error) {
	if file == "" || file == "-" {
		b, err := io.ReadAll(stdin)
		if err != nil {
			return nil, "", fmt.Errorf("reading the transaction from stdin: %v", err)
		}
		return b, "stdin", nil
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, "", fmt.Errorf("reading the transaction: %v", err)
	}
	return b, file, nil
}

// writeTxnText prints the branch that ran and one result per op.
func writeTxnText(w io.Writer, resp *client.TxnResponse) error {
	branch := "FAILURE"
	if resp.Succeeded {
		branch = "SUCCESS"
	}
	if _, err := fmt.Fprintln(w, branch); err != nil {
		return err
	}
	for _, r := range resp.Responses {
		switch r.Kind {
		case client.KindPut:
			if _, err := fmt.Fprintln(w, "OK"); err != nil {
				return err
			}
		case client.KindDelete:
			if _, err := fmt.Fprintln(w, r.Deleted); err != nil {
				return err
			}
		case client.KindGet, client.KindScan:
			for _, kv := range r.KVs {
				if err := writeLine(w, kv.Key); err != nil {
					return err
				}
				if err := writeLine(w, kv.Value); err != nil {
					return err
				}
			}
		}
	}
	return nil
}
