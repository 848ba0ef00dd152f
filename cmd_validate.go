package main

import (
	"errors"

	"github.com/spf13/cobra"
)

// newValidateCommand is a placeholder until the validate subcommand lands.
func newValidateCommand() *cobra.Command {
	return &cobra.Command{
		Use:    "validate",
		Hidden: true,
		RunE:   func(*cobra.Command, []string) error { return errors.New("validate: not built yet") },
	}
}
