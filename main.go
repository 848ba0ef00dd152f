// Command kafka-mirror is the one binary of kafka-mirror-operator: the operator
// (`manager`), the mirror engine (`run`), the embedded-cluster quick start (`demo`), the
// config checker (`validate`) and `version`.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := newRootCommand().ExecuteContext(ctx)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "Error:", err)
		os.Exit(1)
	}
}

func newRootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:   "kafka-mirror",
		Short: "Mirror Kafka topics between clusters without losing data",
		Long: `kafka-mirror mirrors Kafka topics from a source cluster to a target cluster.
It commits a source offset only after the target acknowledged every record up to it,
keeps records in their source partition and keeps target partition counts in sync.

Run it on Kubernetes as an operator (kafka-mirror manager) driven by KafkaMirror
resources, or on its own from one YAML file (kafka-mirror run --config mirror.yaml).`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	logFlags.register(root)
	root.AddCommand(
		newRunCommand(),
		newManagerCommand(),
		newDemoCommand(),
		newValidateCommand(),
		newVersionCommand(),
	)
	return root
}
