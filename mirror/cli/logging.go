package cli

import (
	"fmt"

	"github.com/go-logr/logr"
	"github.com/go-logr/zapr"
	"github.com/spf13/cobra"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// Default values of the logging flags.
const (
	DefaultLogLevel  = "info"
	DefaultLogFormat = "console"
)

// LogOptions are the logging flags shared by every subcommand: --log-level and
// --log-format.
type LogOptions struct {
	// Level is debug, info, warn or error.
	Level string
	// Format is console (for people) or json (for log collectors).
	Format string
}

// AddFlags registers --log-level and --log-format as persistent flags of cmd, so every
// subcommand accepts them.
func (o *LogOptions) AddFlags(cmd *cobra.Command) {
	cmd.PersistentFlags().StringVar(&o.Level, "log-level", DefaultLogLevel, "log level: debug, info, warn or error")
	cmd.PersistentFlags().StringVar(&o.Format, "log-format", DefaultLogFormat, "log format: console or json")
}

// Build returns the logr.Logger the options describe, backed by zap.
func (o LogOptions) Build() (logr.Logger, error) {
	level, err := zapcore.ParseLevel(o.Level)
	if err != nil {
		return logr.Discard(), fmt.Errorf("--log-level: %w", err)
	}
	var zc zap.Config
	switch o.Format {
	case "json":
		zc = zap.NewProductionConfig()
	case "console":
		zc = zap.NewDevelopmentConfig()
		zc.Development = false
	default:
		return logr.Discard(), fmt.Errorf("--log-format: %q is not console or json", o.Format)
	}
	// No Go stack traces in either format: an error says what failed, on which cluster
	// and why (its message wraps its causes), and a trace of the engine's goroutines in
	// every error line, zap's production default, reads to an operator like a crash.
	zc.DisableStacktrace = true
	zc.Level = zap.NewAtomicLevelAt(level)
	zc.Sampling = nil
	z, err := zc.Build()
	if err != nil {
		return logr.Discard(), fmt.Errorf("while building the logger: %w", err)
	}
	return zapr.NewLogger(z), nil
}

// NewLogger builds the logger a subcommand logs through from the --log-level and
// --log-format flags it inherited from its root command. It reads the flags from cmd
// rather than from a package variable, so that a command added to the root by another
// package (the operator's `manager`) logs the same way; a command used without the
// root gets the defaults.
func NewLogger(cmd *cobra.Command) (logr.Logger, error) {
	o := LogOptions{Level: DefaultLogLevel, Format: DefaultLogFormat}
	if f := cmd.Flag("log-level"); f != nil {
		o.Level = f.Value.String()
	}
	if f := cmd.Flag("log-format"); f != nil {
		o.Format = f.Value.String()
	}
	return o.Build()
}
