package main

import (
	"errors"

	"github.com/spf13/cobra"
)

// newDemoCommand is a placeholder until the demo subcommand lands.
func newDemoCommand() *cobra.Command {
	return &cobra.Command{
		Use:    "demo",
		Hidden: true,
		RunE:   func(*cobra.Command, []string) error { return errors.New("demo: not built yet") },
	}
}
