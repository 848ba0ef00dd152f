package main

import (
	"errors"

	"github.com/spf13/cobra"
)

// newVersionCommand is a placeholder until the version subcommand lands.
func newVersionCommand() *cobra.Command {
	return &cobra.Command{
		Use:    "version",
		Hidden: true,
		RunE:   func(*cobra.Command, []string) error { return errors.New("version: not built yet") },
	}
}
