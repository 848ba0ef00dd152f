package cli

import (
	"bytes"
	"fmt"
	"path/filepath"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/kafka-mirror/kafka-mirror-operator/internal/testutil"
	"github.com/kafka-mirror/kafka-mirror-operator/mirror/config"
	"github.com/spf13/cobra"
)

const noRenderer = "this binary cannot check KafkaMirror manifests: its main does not pass cli.WithManifestRenderer"

// TestValidateCommand checks `validate` as Main builds it, without a KafkaMirror
// renderer: config files, and MirrorConfig documents in manifest files. The stock
// binary's KafkaMirror checks are tested in package main.
func TestValidateCommand(t *testing.T) {
	// The fixtures: MirrorConfig and KafkaMirror files, valid and not, a directory and
	// an empty kustomization; package main's validate test reads the same files.
	dir := filepath.Join("testdata", "validate")
	testutil.RunCommandCases(t, func() *cobra.Command { return NewRootCommand() }, []string{"validate"}, dir, []string{"dir", "empty"}, map[string]testutil.CommandCase{
		"valid config": {
			Args: []string{"--config", "good.yaml"},
			Want: "OK: good.yaml: MirrorConfig, 1 include pattern(s), 1 exclude pattern(s), 2 handler(s) (cel filter, header-filter), rebalance listener log\n",
		},
		"invalid config: every problem with its path": {
			Args: []string{"--config", "bad.yaml"},
			Want: "bad.yaml: topics.include[0]: Invalid value: \"orders(\": error parsing regexp: missing closing ): `orders(`\n" +
				"bad.yaml: streams: Invalid value: 100: must be between 1 and 64\n" +
				"bad.yaml: handlers[3]: Required value: set cel or name\n" +
				"bad.yaml: handlers[0].cel.filter: 1:7: undefined field 'topik'\n | record.topik == 'x'\n | ......^\n" +
				"bad.yaml: handlers[1].name: unknown handler \"nope\" (registered: identity, header-filter, topic-router)\n" +
				"bad.yaml: handlers[2].args.pattern: error parsing regexp: missing closing ): `a(`\n" +
				"bad.yaml: rebalanceListener.name: unknown rebalance listener \"logg\" (registered: log)\n",
			WantErr: "validate found 7 problem(s)",
		},
		"unknown field": {
			Args:    []string{"--config", "unknown.yaml"},
			Want:    "unknown.yaml: bogus: Forbidden: unknown field (keys are case-sensitive)\n",
			WantErr: "validate found 1 problem(s)",
		},
		"missing file": {
			Args:    []string{"--config", "missing.yaml"},
			Want:    "missing.yaml: open: no such file or directory\n",
			WantErr: "validate found 1 problem(s)",
		},
		"a manifest without a mirror is a problem": {
			Args:    []string{"-f", "no-mirror.yaml"},
			Want:    "no-mirror.yaml: no KafkaMirror or MirrorConfig found\n",
			WantErr: "validate found 1 problem(s)",
		},
		"a directory without mirrors": {
			Args:    []string{"-f", "empty"},
			Want:    "empty: no KafkaMirror or MirrorConfig found\n",
			WantErr: "validate found 1 problem(s)",
		},
		"a MirrorConfig in a manifest file needs no renderer": {
			Args: []string{"-f", "good.yaml"},
			Want: "OK: good.yaml: MirrorConfig, 1 include pattern(s), 1 exclude pattern(s), 2 handler(s) (cel filter, header-filter), rebalance listener log\n",
		},
		"a KafkaMirror without a renderer is a problem, not a pass": {
			Args:    []string{"-f", "km.yaml"},
			Want:    "km.yaml: document 0 (KafkaMirror default/orders): " + noRenderer + "\n",
			WantErr: "validate found 1 problem(s)",
		},
		"a directory of KafkaMirrors without a renderer": {
			Args: []string{"-f", "dir"},
			Want: "dir/a.yaml: document 0 (KafkaMirror default/orders): " + noRenderer + "\n" +
				"dir/b.yml: document 0 (KafkaMirror payments): " + noRenderer + "\n",
			WantErr: "validate found 2 problem(s)",
		},
		"a failback beside the mirror it fails back from": {
			Args: []string{"--config", "failover-forward.yaml", "--config", "failback.yaml"},
			Want: "OK: failover-forward.yaml: MirrorConfig, 1 include pattern(s), 0 exclude pattern(s), 0 handler(s)\n" +
				"OK: failback.yaml: MirrorConfig, 1 include pattern(s), 0 exclude pattern(s), 0 handler(s)\n",
		},
		"a failback beside another mirror loops": {
			Args: []string{"--config", "failover-forward.yaml", "--config", "failback-other.yaml"},
			Want: "OK: failover-forward.yaml: MirrorConfig, 1 include pattern(s), 0 exclude pattern(s), 0 handler(s)\n" +
				"failback-other.yaml: document 0 (MirrorConfig): provenance.enabled: Required value: MirrorConfig in failover-forward.yaml mirrors this mirror's target back into its source under the same topic names (\"orders\"), so records would loop between the two clusters; set provenance.enabled: true on both, or topics.rename on one\n",
			WantErr: "validate found 1 problem(s)",
		},
		"no file": {
			Args:    nil,
			WantErr: "give --config FILE (a MirrorConfig) or -f FILE (KafkaMirror manifests)",
		},
	})
}

// TestValidateManifestRenderer checks how `validate -f` uses the renderer it is given:
// the rendered config is checked under "spec", metadata.name is required, and a
// renderer error is the document's one problem.
func TestValidateManifestRenderer(t *testing.T) {
	// render stands in for the operator's renderer: its spec is a MirrorConfig.
	render := func(doc []byte) (*config.Config, error) {
		var m struct {
			APIVersion string            `json:"apiVersion"`
			Kind       string            `json:"kind"`
			Metadata   map[string]string `json:"metadata"`
			Spec       config.Config     `json:"spec"`
		}
		if err := yaml.UnmarshalStrict(doc, &m); err != nil {
			return nil, fmt.Errorf("while parsing the KafkaMirror: %w", err)
		}
		m.Spec.Default()
		return &m.Spec, nil
	}
	const head = "apiVersion: kafkamirror.io/v1alpha1\nkind: KafkaMirror\n"
	const spec = "spec:\n  source: {bootstrapServers: [\"a:9092\"]}\n  target: {bootstrapServers: [\"b:9092\"]}\n  consumerGroup: g\n"
	const reverse = "spec:\n  source: {bootstrapServers: [\"b:9092\"]}\n  target: {bootstrapServers: [\"a:9092\"]}\n  consumerGroup: g\n"
	tests := map[string]struct {
		doc     string
		want    string
		wantErr string
	}{
		"valid": {
			doc:  head + "metadata: {name: m, namespace: ns}\n" + spec + "  topics: {include: [orders]}\n",
			want: "OK: km.yaml: KafkaMirror ns/m, 1 include pattern(s), 0 exclude pattern(s), 0 handler(s)\n",
		},
		"problems under spec": {
			doc: head + "metadata: {name: m}\n" + spec + "  topics: {include: [\"orders(\"]}\n  handlers: [{name: nope}]\n",
			want: "km.yaml: document 0 (KafkaMirror m): spec.topics.include[0]: Invalid value: \"orders(\": error parsing regexp: missing closing ): `orders(`\n" +
				"km.yaml: document 0 (KafkaMirror m): spec.handlers[0].name: unknown handler \"nope\" (registered: identity, header-filter, topic-router)\n",
			wantErr: "validate found 2 problem(s)",
		},
		"no name": {
			doc:     head + "metadata: {namespace: ns}\n" + spec + "  topics: {include: [orders]}\n",
			want:    "km.yaml: document 0 (KafkaMirror ns/): metadata.name: Required value\n",
			wantErr: "validate found 1 problem(s)",
		},
		"a reverse mirror with the same names loops": {
			doc: head + "metadata: {name: ab}\n" + spec + "  topics: {include: [orders]}\n---\n" +
				head + "metadata: {name: ba}\n" + reverse + "  topics: {include: [orders, payments]}\n",
			want: "km.yaml: document 1 (KafkaMirror ba): spec.provenance.enabled: Required value: KafkaMirror ab mirrors this mirror's target back into its source under the same topic names (\"orders\"), so records would loop between the two clusters; set provenance.enabled: true on both, or topics.rename on one\n" +
				"OK: km.yaml: KafkaMirror ab, 1 include pattern(s), 0 exclude pattern(s), 0 handler(s)\n",
			wantErr: "validate found 1 problem(s)",
		},
		"a reverse mirror with provenance on both": {
			doc: head + "metadata: {name: ab}\n" + spec + "  topics: {include: [orders]}\n  provenance: {enabled: true}\n---\n" +
				head + "metadata: {name: ba}\n" + reverse + "  topics: {include: [orders]}\n  provenance: {enabled: true}\n",
			want: "OK: km.yaml: KafkaMirror ab, 1 include pattern(s), 0 exclude pattern(s), 0 handler(s)\n" +
				"OK: km.yaml: KafkaMirror ba, 1 include pattern(s), 0 exclude pattern(s), 0 handler(s)\n",
		},
		"renderer error": {
			doc:     head + "metadata: {name: m}\n" + spec + "  topics: {include: [orders]}\n  replica: 2\n",
			want:    "km.yaml: document 0 (KafkaMirror m): while parsing the KafkaMirror: error unmarshaling JSON: while decoding JSON: json: unknown field \"replica\"\n",
			wantErr: "validate found 1 problem(s)",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			path := testutil.WriteFile(t, dir, "km.yaml", tc.doc)
			var out bytes.Buffer
			cmd := NewValidateCommand(WithManifestRenderer(render))
			cmd.SilenceErrors, cmd.SilenceUsage = true, true
			cmd.SetOut(&out)
			cmd.SetArgs([]string{"-f", path})
			err := cmd.Execute()
			testutil.CheckOutput(t, out.String(), dir, err, tc.want, tc.wantErr)
		})
	}
}
