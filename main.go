// Command kafka-mirror is the one binary of kafka-mirror-operator: the operator
// (`manager`), the mirror engine (`run`), the embedded-cluster quick start (`demo`), the
// config checker (`validate`) and `version`.
//
// The engine's commands live in package mirror/cli, so that a team can build the same
// CLI with its own handlers (docs/custom-handlers.md); this main adds what needs the
// operator: `manager`, `demo` and the KafkaMirror renderer of `validate -f`.
package main

import (
	"os"

	"github.com/spf13/cobra"

	"github.com/kafka-mirror/kafka-mirror-operator/mirror/cli"
)

func main() {
	os.Exit(cli.Execute(newRootCommand()))
}

func newRootCommand() *cobra.Command {
	root := cli.NewRootCommand(
		cli.WithManifestRenderer(renderKafkaMirror),
		cli.WithCommands(newManagerCommand(), newDemoCommand()),
	)
	root.Long = `kafka-mirror mirrors Kafka topics from a source cluster to a target cluster.
It commits a source offset only after the target acknowledged every record up to it,
keeps records in their source partition and keeps target partition counts in sync.

Run it on Kubernetes as an operator (kafka-mirror manager) driven by KafkaMirror
resources, or on its own from one YAML file (kafka-mirror run --config mirror.yaml).
The same binary checks configs before they are applied (kafka-mirror validate) and shows
the whole job on two embedded Kafka clusters (kafka-mirror demo).`
	root.Example = `  # See it work: two embedded clusters, a kill -9, and an audit of every record
  kafka-mirror demo

  # Mirror from one YAML file, outside Kubernetes
  kafka-mirror run --config mirror.yaml

  # Check a config file or a KafkaMirror manifest before a GitOps merge
  kafka-mirror validate --config mirror.yaml

  # Run the operator (what the Helm chart and config/default deploy)
  kafka-mirror manager`
	return root
}
