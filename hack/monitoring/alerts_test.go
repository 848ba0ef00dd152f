package main

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// alertTests holds the unit tests of every alert, in promtool's format.
const alertTests = "testdata/alerts_test.yaml"

// promtoolBinary is $PROMTOOL, which `make test` sets after `make promtool` builds it from
// the Prometheus module version this module pins.
func promtoolBinary(t *testing.T) string {
	t.Helper()
	p := os.Getenv("PROMTOOL")
	if p == "" {
		t.Fatal("PROMTOOL is not set: run the tests with `make test`, or `make promtool` and set PROMTOOL to the binary it builds (~/.cache/kafka-mirror/bin/promtool-<version>)")
	}
	if _, err := exec.LookPath(p); err != nil {
		t.Fatalf("PROMTOOL=%s is not an executable (%v): run `make promtool`", p, err)
	}
	return p
}

// TestAlertRules runs `promtool check rules` on the chart's rule file and `promtool test
// rules` on the unit tests, which cover every alert: each fires when it should and stays
// quiet when it should not.
func TestAlertRules(t *testing.T) {
	promtool := promtoolBinary(t)
	out, err := exec.Command(promtool, "check", "rules", "../../"+chartRulesFile).CombinedOutput()
	if err != nil {
		t.Fatalf("promtool check rules: %v\n%s", err, out)
	}
	if want := fmt.Sprintf("SUCCESS: %d rules found", len(alerts)); !strings.Contains(string(out), want) {
		t.Errorf("promtool check rules output lacks %q:\n%s", want, out)
	}

	data, err := os.ReadFile(alertTests)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range alerts {
		if !strings.Contains(string(data), "alertname: "+a.Alert+"\n") {
			t.Errorf("%s has no unit test in %s", a.Alert, alertTests)
		}
	}
	out, err = exec.Command(promtool, "test", "rules", alertTests).CombinedOutput()
	if err != nil {
		t.Fatalf("promtool test rules: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "SUCCESS") {
		t.Errorf("promtool test rules output:\n%s", out)
	}
	t.Logf("promtool test rules:\n%s", out)
}
