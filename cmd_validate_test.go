package main

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"
)

// TestValidateCommand checks `validate -f` of the stock binary, whose KafkaMirror
// renderer is the operator's; config files alone are tested in mirror/cli.
func TestValidateCommand(t *testing.T) {
	// The fixtures: MirrorConfig and KafkaMirror files, valid and not, a directory and
	// an empty kustomization; package mirror/cli's validate test reads the same files.
	dir := filepath.Join("mirror", "cli", "testdata", "validate")
	files := map[string]string{"dir": filepath.Join(dir, "dir"), "empty": filepath.Join(dir, "empty")}
	tests := map[string]struct {
		args    []string
		want    string // output, with FILE(name) replaced by the path
		wantErr string
	}{
		"valid config": {
			args: []string{"--config", "good.yaml"},
			want: "OK: good.yaml: MirrorConfig, 1 include pattern(s), 1 exclude pattern(s), 2 handler(s) (cel filter, header-filter), rebalance listener log\n",
		},
		"valid KafkaMirror": {
			args: []string{"-f", "km.yaml"},
			want: "OK: km.yaml: KafkaMirror default/orders, 1 include pattern(s), 0 exclude pattern(s), 1 handler(s) (cel filter)\n",
		},
		"invalid KafkaMirror: spec paths": {
			args: []string{"-f", "km-bad.yaml"},
			want: "km-bad.yaml: document 0 (KafkaMirror payments): spec: Invalid value: source and target are the same cluster and topics.rename is not set: the mirror would write into the topics it reads (a mirror loop); set topics.rename.prefix or topics.rename.template\n" +
				"km-bad.yaml: document 0 (KafkaMirror payments): spec.handlers[0].cel.transform.topic: must give string, not int\n" +
				"km-bad.yaml: document 0 (KafkaMirror payments): spec.rebalanceListener.args.verbosity: \"loud\" is not a non-negative integer\n",
			wantErr: "validate found 3 problem(s)",
		},
		"invalid KafkaMirror: pod options the schema cannot check": {
			args: []string{"-f", "km-pod.yaml"},
			want: "km-pod.yaml: document 0 (KafkaMirror orders): spec.pod.volumes[0].name: Invalid value: \"tmp\": config, tmp and names starting with source- or target- are the operator's volumes\n" +
				"km-pod.yaml: document 0 (KafkaMirror orders): spec.pod.volumeMounts[0].mountPath: Invalid value: \"/etc/kafka-mirror/extra\": /tmp and /etc/kafka-mirror are where the operator mounts the config, Secrets and scratch space\n" +
				"km-pod.yaml: document 0 (KafkaMirror orders): spec.pod.terminationGracePeriodSeconds: Invalid value: 10: must be at least deliveryTimeout (2m0s): a stopping pod waits that long for the target's acks before it commits, and would be killed mid-drain\n",
			wantErr: "validate found 3 problem(s)",
		},
		"KafkaMirror with a misspelt field": {
			args:    []string{"-f", "km-typo.yaml"},
			want:    "km-typo.yaml: document 0 (KafkaMirror default/orders): spec.replica: Invalid value: strict decoding error: unknown field \"spec.replica\"\n",
			wantErr: "validate found 1 problem(s)",
		},
		"multi-document file: other kinds skipped": {
			args: []string{"-f", "bundle.yaml"},
			want: "bundle.yaml: document 2 (KafkaMirror payments): spec: Invalid value: source and target are the same cluster and topics.rename is not set: the mirror would write into the topics it reads (a mirror loop); set topics.rename.prefix or topics.rename.template\n" +
				"bundle.yaml: document 2 (KafkaMirror payments): spec.handlers[0].cel.transform.topic: must give string, not int\n" +
				"bundle.yaml: document 2 (KafkaMirror payments): spec.rebalanceListener.args.verbosity: \"loud\" is not a non-negative integer\n" +
				"OK: bundle.yaml: KafkaMirror default/orders, 1 include pattern(s), 0 exclude pattern(s), 1 handler(s) (cel filter)\n",
			wantErr: "validate found 3 problem(s)",
		},
		"a manifest without a mirror is a problem": {
			args:    []string{"-f", "no-mirror.yaml"},
			want:    "no-mirror.yaml: no KafkaMirror or MirrorConfig found\n",
			wantErr: "validate found 1 problem(s)",
		},
		"a directory: its YAML files, not nested ones, mirror-less files passed over": {
			args: []string{"-f", "dir"},
			want: "OK: dir/a.yaml: KafkaMirror default/orders, 1 include pattern(s), 0 exclude pattern(s), 1 handler(s) (cel filter)\n" +
				"dir/b.yml: document 0 (KafkaMirror payments): spec: Invalid value: source and target are the same cluster and topics.rename is not set: the mirror would write into the topics it reads (a mirror loop); set topics.rename.prefix or topics.rename.template\n" +
				"dir/b.yml: document 0 (KafkaMirror payments): spec.handlers[0].cel.transform.topic: must give string, not int\n" +
				"dir/b.yml: document 0 (KafkaMirror payments): spec.rebalanceListener.args.verbosity: \"loud\" is not a non-negative integer\n",
			wantErr: "validate found 3 problem(s)",
		},
		"a directory without mirrors": {
			args:    []string{"-f", "empty"},
			want:    "empty: no KafkaMirror or MirrorConfig found\n",
			wantErr: "validate found 1 problem(s)",
		},
		"config and manifests together": {
			args: []string{"--config", "good.yaml", "-f", "km.yaml"},
			want: "OK: good.yaml: MirrorConfig, 1 include pattern(s), 1 exclude pattern(s), 2 handler(s) (cel filter, header-filter), rebalance listener log\n" +
				"OK: km.yaml: KafkaMirror default/orders, 1 include pattern(s), 0 exclude pattern(s), 1 handler(s) (cel filter)\n",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			// Files are named by their short names in the table; run with full paths and
			// map them back in the output.
			args := []string{"validate"}
			for _, a := range tc.args {
				if p, ok := files[a]; ok {
					a = p
				} else if strings.HasSuffix(a, ".yaml") {
					a = filepath.Join(dir, a)
				}
				args = append(args, a)
			}
			var out bytes.Buffer
			root := newRootCommand()
			root.SetOut(&out)
			root.SetErr(&out)
			root.SetArgs(args)
			err := root.Execute()
			got := strings.ReplaceAll(out.String(), dir+string(filepath.Separator), "")
			if got != tc.want {
				t.Errorf("output =\n%s\nwant\n%s", got, tc.want)
			}
			gotErr := ""
			if err != nil {
				gotErr = err.Error()
			}
			if gotErr != tc.wantErr {
				t.Errorf("error = %q, want %q", gotErr, tc.wantErr)
			}
		})
	}
}
