package main

import (
	"path/filepath"
	"testing"

	"github.com/kafka-mirror/kafka-mirror-operator/internal/testutil"
)

// TestValidateCommand checks `validate -f` of the stock binary, whose KafkaMirror
// renderer is the operator's; config files alone are tested in mirror/cli.
func TestValidateCommand(t *testing.T) {
	// The fixtures: MirrorConfig and KafkaMirror files, valid and not, a directory and
	// an empty kustomization; package mirror/cli's validate test reads the same files.
	dir := filepath.Join("mirror", "cli", "testdata", "validate")
	testutil.RunCommandCases(t, newRootCommand, []string{"validate"}, dir, []string{"dir", "empty"}, map[string]testutil.CommandCase{
		"valid KafkaMirror": {
			Args: []string{"-f", "km.yaml"},
			Want: "OK: km.yaml: KafkaMirror default/orders, 1 include pattern(s), 0 exclude pattern(s), 1 handler(s) (cel filter)\n",
		},
		"invalid KafkaMirror: spec paths": {
			Args: []string{"-f", "km-bad.yaml"},
			Want: "km-bad.yaml: document 0 (KafkaMirror payments): spec: Invalid value: source and target are the same cluster and topics.rename is not set: the mirror would write into the topics it reads (a mirror loop); set topics.rename.prefix or topics.rename.template\n" +
				"km-bad.yaml: document 0 (KafkaMirror payments): spec.handlers[0].cel.transform.topic: must give string, not int\n" +
				"km-bad.yaml: document 0 (KafkaMirror payments): spec.rebalanceListener.args.verbosity: \"loud\" is not a non-negative integer\n",
			WantErr: "validate found 3 problem(s)",
		},
		"invalid KafkaMirror: pod options the schema cannot check": {
			Args: []string{"-f", "km-pod.yaml"},
			Want: "km-pod.yaml: document 0 (KafkaMirror orders): spec.pod.volumes[0].name: Invalid value: \"tmp\": config, tmp and names starting with source- or target- are the operator's volumes\n" +
				"km-pod.yaml: document 0 (KafkaMirror orders): spec.pod.volumeMounts[0].mountPath: Invalid value: \"/etc/kafka-mirror/extra\": /tmp and /etc/kafka-mirror are where the operator mounts the config, Secrets and scratch space\n" +
				"km-pod.yaml: document 0 (KafkaMirror orders): spec.pod.terminationGracePeriodSeconds: Invalid value: 10: must be at least deliveryTimeout (2m0s): a stopping pod waits that long for the target's acks before it commits, and would be killed mid-drain\n",
			WantErr: "validate found 3 problem(s)",
		},
		"KafkaMirror with a misspelt field": {
			Args:    []string{"-f", "km-typo.yaml"},
			Want:    "km-typo.yaml: document 0 (KafkaMirror default/orders): spec.replica: Invalid value: strict decoding error: unknown field \"spec.replica\"\n",
			WantErr: "validate found 1 problem(s)",
		},
		"multi-document file: other kinds skipped": {
			Args: []string{"-f", "bundle.yaml"},
			Want: "bundle.yaml: document 2 (KafkaMirror payments): spec: Invalid value: source and target are the same cluster and topics.rename is not set: the mirror would write into the topics it reads (a mirror loop); set topics.rename.prefix or topics.rename.template\n" +
				"bundle.yaml: document 2 (KafkaMirror payments): spec.handlers[0].cel.transform.topic: must give string, not int\n" +
				"bundle.yaml: document 2 (KafkaMirror payments): spec.rebalanceListener.args.verbosity: \"loud\" is not a non-negative integer\n" +
				"OK: bundle.yaml: KafkaMirror default/orders, 1 include pattern(s), 0 exclude pattern(s), 1 handler(s) (cel filter)\n",
			WantErr: "validate found 3 problem(s)",
		},
		"a directory: its YAML files, not nested ones, mirror-less files passed over": {
			Args: []string{"-f", "dir"},
			Want: "OK: dir/a.yaml: KafkaMirror default/orders, 1 include pattern(s), 0 exclude pattern(s), 1 handler(s) (cel filter)\n" +
				"dir/b.yml: document 0 (KafkaMirror payments): spec: Invalid value: source and target are the same cluster and topics.rename is not set: the mirror would write into the topics it reads (a mirror loop); set topics.rename.prefix or topics.rename.template\n" +
				"dir/b.yml: document 0 (KafkaMirror payments): spec.handlers[0].cel.transform.topic: must give string, not int\n" +
				"dir/b.yml: document 0 (KafkaMirror payments): spec.rebalanceListener.args.verbosity: \"loud\" is not a non-negative integer\n",
			WantErr: "validate found 3 problem(s)",
		},
		"config and manifests together": {
			Args: []string{"--config", "good.yaml", "-f", "km.yaml"},
			Want: "OK: good.yaml: MirrorConfig, 1 include pattern(s), 1 exclude pattern(s), 2 handler(s) (cel filter, header-filter), rebalance listener log\n" +
				"OK: km.yaml: KafkaMirror default/orders, 1 include pattern(s), 0 exclude pattern(s), 1 handler(s) (cel filter)\n",
		},
	})
}
