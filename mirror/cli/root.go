package cli

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"
)

// Option configures NewRootCommand and NewValidateCommand.
type Option func(*options)

type options struct {
	render   ManifestRenderer
	commands []*cobra.Command
}

func newOptions(opts []Option) options {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	return o
}

// WithManifestRenderer lets `validate -f` check KafkaMirror manifests by rendering them
// with render (the stock binary passes one built on controllers.RenderConfig).
func WithManifestRenderer(render ManifestRenderer) Option {
	return func(o *options) { o.render = render }
}

// WithCommands adds subcommands to the root command next to run, validate and version
// (the stock binary adds manager and demo).
func WithCommands(cmds ...*cobra.Command) Option {
	return func(o *options) { o.commands = append(o.commands, cmds...) }
}

// NewRootCommand builds the kafka-mirror command: the logging flags, run, validate,
// version and any WithCommands. Its help describes the engine alone; a main that adds
// subcommands may set Long and Example to describe them too.
func NewRootCommand(opts ...Option) *cobra.Command {
	o := newOptions(opts)
	root := &cobra.Command{
		Use:   "kafka-mirror",
		Short: "Mirror Kafka topics between clusters without losing data",
		Long: `kafka-mirror mirrors Kafka topics from a source cluster to a target cluster.
It commits a source offset only after the target acknowledged every record up to it,
keeps records in their source partition and keeps target partition counts in sync.

It runs from one YAML file (kafka-mirror run --config mirror.yaml), on its own or as
the engine of the pods a KafkaMirror resource creates, and checks a config before it is
applied (kafka-mirror validate).`,
		Example: `  # Mirror from one YAML file
  kafka-mirror run --config mirror.yaml

  # Check a config file before a GitOps merge
  kafka-mirror validate --config mirror.yaml`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	var logFlags LogOptions
	logFlags.AddFlags(root)
	root.AddCommand(NewRunCommand(), NewValidateCommand(opts...), NewVersionCommand(), NewOffsetsCommand(), NewFailoverCommand(), NewFailbackCommand())
	root.AddCommand(o.commands...)
	return root
}

// Execute runs root with the process's arguments until it returns or SIGINT or SIGTERM
// cancels its context, prints an error as one "Error: ..." line on stderr, and returns
// the exit code: 0 on success, 1 on an error.
func Execute(root *cobra.Command) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := root.ExecuteContext(ctx); err != nil {
		fmt.Fprintln(root.ErrOrStderr(), "Error:", err)
		return 1
	}
	return 0
}

// Main runs the kafka-mirror CLI (run, validate, version and the extra subcommands) and
// returns the exit code for os.Exit. A team's own image registers its handlers and then
// calls it:
//
//	func main() {
//		handler.Register("redact-email", newRedactor)
//		os.Exit(cli.Main())
//	}
func Main(extra ...*cobra.Command) int {
	return Execute(NewRootCommand(WithCommands(extra...)))
}
