package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/cutkv/cutkv/internal/version"
)

func newVersionCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print kvctl's version, commit and Go version",
		Long: `Print the version of this kvctl: module version (or what the Makefile's
build set), the commit it was built from ("(modified)" when the work tree
had changes), and the Go version. -o json prints
{"version","commit","modified","go_version"}. It does not contact the
cluster: the nodes' versions are in 'kvctl status'.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := g.checkFlags(); err != nil {
				return err
			}
			info := version.Get()
			if g.json() {
				return writeJSON(cmd.OutOrStdout(), info)
			}
			_, err := fmt.Fprintln(cmd.OutOrStdout(), info.String("kvctl"))
			return err
		},
	}
}
