package main

import (
	"fmt"

	"github.com/go-logr/logr"
	"github.com/go-logr/zapr"
	"github.com/spf13/cobra"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// logOptions are the logging flags shared by every subcommand.
type logOptions struct {
	level  string
	format string
}

var logFlags logOptions

func (o *logOptions) register(cmd *cobra.Command) {
	cmd.PersistentFlags().StringVar(&o.level, "log-level", "info", "log level: debug, info, warn or error")
	cmd.PersistentFlags().StringVar(&o.format, "log-format", "console", "log format: console or json")
}

// newLogger builds the logr.Logger every subcommand logs through.
func (o *logOptions) newLogger() (logr.Logger, error) {
	level, err := zapcore.ParseLevel(o.level)
	if err != nil {
		return logr.Discard(), fmt.Errorf("--log-level: %w", err)
	}
	var zc zap.Config
	switch o.format {
	case "json":
		zc = zap.NewProductionConfig()
	case "console":
		zc = zap.NewDevelopmentConfig()
		zc.Development = false
		zc.DisableStacktrace = true
	default:
		return logr.Discard(), fmt.Errorf("--log-format: %q is not console or json", o.format)
	}
	zc.Level = zap.NewAtomicLevelAt(level)
	zc.Sampling = nil
	z, err := zc.Build()
	if err != nil {
		return logr.Discard(), fmt.Errorf("while building the logger: %w", err)
	}
	return zapr.NewLogger(z), nil
}
