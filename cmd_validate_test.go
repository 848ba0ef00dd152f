package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const validMirrorConfig = `apiVersion: kafkamirror.io/v1alpha1
kind: MirrorConfig
source: {bootstrapServers: ["source-kafka:9092"]}
target: {bootstrapServers: ["target-kafka:9092"]}
consumerGroup: kafka-mirror.default.orders
topics: {include: ["orders\\..*"], exclude: ["orders\\.tmp\\..*"]}
handlers:
  - cel: {filter: "!('skip' in record.headers)"}
  - name: header-filter
    args: {mode: drop, header: internal}
rebalanceListener: {name: log}
`

const invalidMirrorConfig = `apiVersion: kafkamirror.io/v1alpha1
kind: MirrorConfig
source: {bootstrapServers: ["source-kafka:9092"]}
target: {bootstrapServers: ["target-kafka:9092"]}
consumerGroup: g
topics: {include: ["orders("]}
streams: 100
handlers:
  - cel: {filter: "record.topik == 'x'"}
  - name: nope
  - name: topic-router
    args: {pattern: "a(", topic: "x"}
  - {}
rebalanceListener: {name: logg}
`

const validKafkaMirror = `apiVersion: kafkamirror.io/v1alpha1
kind: KafkaMirror
metadata: {name: orders, namespace: default}
spec:
  source:
    bootstrapServers: ["source-kafka:9092"]
    sasl: {mechanism: SCRAM-SHA-512, username: mirror, passwordSecretRef: {name: source-creds, key: password}}
  target: {bootstrapServers: ["target-kafka:9092"]}
  topics: {include: ["orders\\..*"]}
  replicas: 2
  streams: 4
  handlers:
    - cel: {filter: "!('skip' in record.headers)"}
`

const invalidKafkaMirror = `apiVersion: kafkamirror.io/v1alpha1
kind: KafkaMirror
metadata: {name: payments}
spec:
  source: {bootstrapServers: ["kafka:9092"]}
  target: {bootstrapServers: ["kafka:9092"]}
  topics: {include: ["payments"]}
  handlers:
    - cel: {transform: {topic: "record.partition"}}
  rebalanceListener: {name: log, args: {verbosity: loud}}
`

func writeFile(t *testing.T, dir, name, content string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestValidateCommand checks `validate -f` of the stock binary, whose KafkaMirror
// renderer is the operator's; config files alone are tested in mirror/cli.
func TestValidateCommand(t *testing.T) {
	dir := t.TempDir()
	files := map[string]string{
		"good.yaml":      writeFile(t, dir, "good.yaml", validMirrorConfig),
		"bad.yaml":       writeFile(t, dir, "bad.yaml", invalidMirrorConfig),
		"unknown.yaml":   writeFile(t, dir, "unknown.yaml", validMirrorConfig+"bogus: 1\n"),
		"km.yaml":        writeFile(t, dir, "km.yaml", validKafkaMirror),
		"km-bad.yaml":    writeFile(t, dir, "km-bad.yaml", invalidKafkaMirror),
		"bundle.yaml":    writeFile(t, dir, "bundle.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n---\n"+validKafkaMirror+"---\n"+invalidKafkaMirror),
		"no-mirror.yaml": writeFile(t, dir, "no-mirror.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n"),
		"km-typo.yaml":   writeFile(t, dir, "km-typo.yaml", strings.Replace(validKafkaMirror, "replicas: 2", "replica: 2", 1)),
	}
	sub := filepath.Join(dir, "dir")
	if err := os.MkdirAll(filepath.Join(sub, "nested"), 0o700); err != nil {
		t.Fatal(err)
	}
	writeFile(t, sub, "a.yaml", validKafkaMirror)
	writeFile(t, sub, "b.yml", invalidKafkaMirror)
	writeFile(t, sub, "kustomization.yaml", "resources: [a.yaml]\n")
	writeFile(t, sub, "README.md", "not yaml: [")
	writeFile(t, filepath.Join(sub, "nested"), "c.yaml", invalidMirrorConfig)
	empty := filepath.Join(dir, "empty")
	if err := os.MkdirAll(empty, 0o700); err != nil {
		t.Fatal(err)
	}
	writeFile(t, empty, "kustomization.yaml", "resources: []\n")
	files["dir"], files["empty"] = sub, empty
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
