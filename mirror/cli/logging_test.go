package cli

import (
	"testing"

	"github.com/spf13/cobra"
)

// TestNewLogger checks that a subcommand's logger follows the flags it inherited from
// the root, and that bad values are errors naming the flag.
func TestNewLogger(t *testing.T) {
	tests := map[string]struct {
		args      []string
		wantDebug bool
		wantErr   string
	}{
		"defaults: info": {args: nil, wantDebug: false},
		"debug, json":    {args: []string{"--log-level", "debug", "--log-format", "json"}, wantDebug: true},
		"error level":    {args: []string{"--log-level", "error"}, wantDebug: false},
		"unknown level":  {args: []string{"--log-level", "loud"}, wantErr: `--log-level: unrecognized level: "loud"`},
		"unknown format": {args: []string{"--log-format", "xml"}, wantErr: `--log-format: "xml" is not console or json`},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			var gotErr string
			var debug bool
			sub := &cobra.Command{Use: "sub", RunE: func(cmd *cobra.Command, _ []string) error {
				log, err := NewLogger(cmd)
				if err != nil {
					gotErr = err.Error()
					return nil
				}
				debug = log.V(1).Enabled()
				return nil
			}}
			root := NewRootCommand(WithCommands(sub))
			root.SetArgs(append([]string{"sub"}, tc.args...))
			if err := root.Execute(); err != nil {
				t.Fatal(err)
			}
			if gotErr != tc.wantErr {
				t.Fatalf("error = %q, want %q", gotErr, tc.wantErr)
			}
			if debug != tc.wantDebug {
				t.Errorf("debug enabled = %t, want %t", debug, tc.wantDebug)
			}
		})
	}
}

// TestNewLoggerWithoutRoot checks that a command used on its own logs at the defaults.
func TestNewLoggerWithoutRoot(t *testing.T) {
	log, err := NewLogger(&cobra.Command{Use: "alone"})
	if err != nil {
		t.Fatal(err)
	}
	if !log.V(0).Enabled() || log.V(1).Enabled() {
		t.Errorf("logger without flags: info enabled %t, debug enabled %t; want info only", log.V(0).Enabled(), log.V(1).Enabled())
	}
}
