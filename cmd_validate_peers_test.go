package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestValidateMirrorsAgainstEachOther: `validate -f` finds in one set of manifests what
// the operator would refuse across KafkaMirrors, with the operator's own checks: a
// mirror loop on topics matched by regular expressions (not only plain names), the
// active-active sample with its provenance lines removed, and a consumer group used by
// two KafkaMirrors on one source cluster or into one target cluster.
func TestValidateMirrorsAgainstEachOther(t *testing.T) {
	mirror := func(ns, name, from, to, include, extra string) string {
		return "apiVersion: kafkamirror.io/v1alpha1\nkind: KafkaMirror\nmetadata: {name: " + name + ", namespace: " + ns + "}\n" +
			"spec:\n  source: {bootstrapServers: [\"" + from + "\"]}\n  target: {bootstrapServers: [\"" + to + "\"]}\n" +
			"  topics: {include: [\"" + include + "\"]}\n" + extra
	}
	sample, err := os.ReadFile("config/samples/kafkamirror_v1alpha1_active_active_identical_names.yaml")
	if err != nil {
		t.Fatal(err)
	}
	failback, err := os.ReadFile("config/samples/kafkamirror_v1alpha1_failback.yaml")
	if err != nil {
		t.Fatal(err)
	}
	withoutProvenance := strings.ReplaceAll(string(sample), "  provenance: {enabled: true}\n", "")
	if withoutProvenance == string(sample) {
		t.Fatal("the active-active sample has no provenance line to remove")
	}
	tests := map[string]struct {
		docs []string
		want string // "" for no problem
		note string // with want "", a text the output holds
	}{
		// The operator's rule (controllers/failback.go, neverMirrorTogether): a failed-over
		// mirror and its failback never run at the same time.
		"the failback sample beside its forward mirror": {
			docs: []string{mirror("", "payments", "kafka.dc1.example.com:9092", "kafka.dc2.example.com:9092", `payments\\..*`, ""), string(failback)},
		},
		"the failback sample beside another mirror": {
			docs: []string{mirror("", "orders", "kafka.dc1.example.com:9092", "kafka.dc2.example.com:9092", `payments\\..*`, ""), string(failback)},
			want: `(KafkaMirror payments-failback): spec.provenance.enabled: Required value: KafkaMirror orders mirrors`,
		},
		"the failback sample in another namespace than its forward mirror": {
			docs: []string{mirror("other", "payments", "kafka.dc1.example.com:9092", "kafka.dc2.example.com:9092", `payments\\..*`, ""), string(failback)},
			want: `(KafkaMirror payments-failback): spec.provenance.enabled: Required value: KafkaMirror other/payments mirrors`,
		},
		"a reverse mirror beside a mirror that declares a failover": {
			docs: []string{mirror("a", "ab", "dc1:9092", "dc2:9092", "orders", "  failover: {mode: planned}\n"), mirror("a", "ba", "dc2:9092", "dc1:9092", "orders", "")},
			note: `OK: ` + "%s" + `: KafkaMirror a/ba, 1 include pattern(s), 0 exclude pattern(s), 0 handler(s); not a mirror loop with KafkaMirror a/ab: it declares spec.failover`,
		},
		"regular expressions both ways": {
			docs: []string{mirror("a", "ab", "dc1:9092", "dc2:9092", `trial\\..*`, ""), mirror("b", "ba", "dc2:9092", "dc1:9092", `trial\\..*`, "")},
			want: `(KafkaMirror b/ba): spec.provenance.enabled: Required value: KafkaMirror a/ab mirrors this mirror's target back into its source under the same topic names ("trial.")`,
		},
		"a plain name against an expression": {
			docs: []string{mirror("a", "ab", "dc1:9092", "dc2:9092", `trial\\..*`, ""), mirror("b", "ba", "dc2:9092", "dc1:9092", "trial.events", "")},
			want: `(KafkaMirror b/ba): spec.provenance.enabled: Required value: KafkaMirror a/ab mirrors this mirror's target back into its source under the same topic names ("trial.events")`,
		},
		"the active-active sample without provenance": {
			docs: []string{withoutProvenance},
			want: `(KafkaMirror orders-dc2-to-dc1-same-names): spec.provenance.enabled: Required value: KafkaMirror orders-dc1-to-dc2-same-names mirrors`,
		},
		"expressions that do not overlap": {
			docs: []string{mirror("a", "ab", "dc1:9092", "dc2:9092", `trial\\..*`, ""), mirror("b", "ba", "dc2:9092", "dc1:9092", `prod\\..*`, "")},
		},
		"another mirror's default group on the same source": {
			docs: []string{mirror("a", "orders", "dc1:9092", "dc2:9092", "orders", ""), mirror("b", "copy", "dc1:9092", "dc3:9092", "orders", "  consumerGroup: kafka-mirror.a.orders\n")},
			want: `(KafkaMirror b/copy): spec.consumerGroup: Invalid value: "kafka-mirror.a.orders": KafkaMirror a/orders uses this consumer group on the same source cluster too`,
		},
		"one group into the same target": {
			docs: []string{mirror("a", "one", "dc1:9092", "dc2:9092", "orders", "  consumerGroup: shared\n"), mirror("a", "two", "dc3:9092", "dc2:9092", "orders", "  consumerGroup: shared\n")},
			want: `(KafkaMirror a/two): spec.consumerGroup: Invalid value: "shared": KafkaMirror a/one uses this consumer group into the same target cluster too`,
		},
		"one group between other clusters": {
			docs: []string{mirror("a", "one", "dc1:9092", "dc2:9092", "orders", "  consumerGroup: shared\n"), mirror("a", "two", "dc3:9092", "dc4:9092", "orders", "  consumerGroup: shared\n")},
		},
		"the same KafkaMirror twice": {
			docs: []string{mirror("default", "orders", "dc1:9092", "dc2:9092", "orders", ""), strings.Replace(mirror("default", "orders", "dc1:9092", "dc2:9092", "orders", ""), ", namespace: default", "", 1)},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "mirrors.yaml")
			if err := os.WriteFile(path, []byte(strings.Join(tc.docs, "---\n")), 0o600); err != nil {
				t.Fatal(err)
			}
			out, err := runValidate(t, "-f", path)
			if tc.want == "" {
				if err != nil {
					t.Fatalf("validate = %v:\n%s", err, out)
				}
				if note := strings.ReplaceAll(tc.note, "%s", path); !strings.Contains(out, note) {
					t.Fatalf("validate printed:\n%s\nwant %q", out, note)
				}
				return
			}
			if err == nil || !strings.Contains(out, tc.want) || strings.Count(out, "OK: ") != 1 {
				t.Fatalf("validate = %v:\n%s\nwant a problem %q and one OK line", err, out, tc.want)
			}
		})
	}
}
