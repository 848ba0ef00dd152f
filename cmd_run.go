package main

import (
	"errors"

	"github.com/spf13/cobra"
)

// newRunCommand is a placeholder until the run subcommand lands.
func newRunCommand() *cobra.Command {
	return &cobra.Command{
		Use:    "run",
		Hidden: true,
		RunE:   func(*cobra.Command, []string) error { return errors.New("run: not built yet") },
	}
}
