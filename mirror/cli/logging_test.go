package cli

import (
	"errors"
	"io"
	"os"
	"strings"
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

// TestErrorsLogNoStackTrace checks that an error logged in either format carries its
// message and cause but no Go stack trace.
func TestErrorsLogNoStackTrace(t *testing.T) {
	for _, format := range []string{"json", "console"} {
		t.Run(format, func(t *testing.T) {
			r, w, err := os.Pipe()
			if err != nil {
				t.Fatal(err)
			}
			stderr := os.Stderr
			os.Stderr = w // zap opens "stderr" when the logger is built
			log, err := LogOptions{Level: "info", Format: format}.Build()
			os.Stderr = stderr
			if err != nil {
				t.Fatal(err)
			}
			log.Error(errors.New("while reading metadata of target topic \"t\": broken pipe"), "Stopped the mirror on a fatal error")
			w.Close()
			out, err := io.ReadAll(r)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(string(out), "Stopped the mirror on a fatal error") || !strings.Contains(string(out), "broken pipe") {
				t.Fatalf("the log line lacks the message or its cause: %s", out)
			}
			if strings.Contains(string(out), "stacktrace") || strings.Contains(string(out), ".go:") && strings.Contains(string(out), "\n\t") {
				t.Fatalf("an error logged with a stack trace: %s", out)
			}
		})
	}
}
