package main

import (
	"errors"

	"github.com/spf13/cobra"
)

// newManagerCommand is a placeholder until the manager subcommand lands.
func newManagerCommand() *cobra.Command {
	return &cobra.Command{
		Use:    "manager",
		Hidden: true,
		RunE:   func(*cobra.Command, []string) error { return errors.New("manager: not built yet") },
	}
}
