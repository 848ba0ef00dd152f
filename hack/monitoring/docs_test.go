package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestAlertsDocumented keeps docs/metrics.md true: every alert has a row (with the anchor
// its runbook_url points at) saying what it means and what to do first, and the rule
// excerpt shows the generated KafkaMirrorLagHigh expression.
func TestAlertsDocumented(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(repoRoot, "docs/metrics.md"))
	if err != nil {
		t.Fatal(err)
	}
	doc := string(data)
	for _, a := range alerts {
		anchor := strings.ToLower(a.Alert)
		if !strings.Contains(doc, `<a id="`+anchor+`"></a>`+"`"+a.Alert+"`") {
			t.Errorf("docs/metrics.md has no alerts-table row for %s with the anchor %q", a.Alert, anchor)
		}
		if !strings.HasSuffix(a.Annotations["runbook_url"], "#"+anchor) {
			t.Errorf("%s runbook_url %q does not point at #%s", a.Alert, a.Annotations["runbook_url"], anchor)
		}
	}
	if !strings.Contains(doc, "expr: "+alerts[0].Expr+"\n") {
		t.Errorf("docs/metrics.md's rule excerpt does not show %s's expression %q", alerts[0].Alert, alerts[0].Expr)
	}
	if !strings.Contains(doc, "(images/dashboard-preview.png)") {
		t.Error("docs/metrics.md does not show the dashboard preview")
	}
}
