package charttest

import (
	"slices"
	"testing"
)

// TestChartEndpointAllowList: allowedEndpoints and allowAssumeRole become the operator's
// --allowed-endpoints and --allow-assume-role; by default neither is passed (no endpoint
// list, roles refused).
func TestChartEndpointAllowList(t *testing.T) {
	args := func(set ...string) []string {
		return stringList(managerContainer(t, one(t, renderChart(t, release, releaseNamespace, set...), "Deployment", fullname))["args"])
	}
	for _, a := range args() {
		if a == "--allow-assume-role=true" || len(a) > 19 && a[:19] == "--allowed-endpoints" {
			t.Errorf("default values pass %s", a)
		}
	}
	got := args(`allowedEndpoints={https://login.example.com,https://*.auth.example:*/realms/*/token}`, "allowAssumeRole=true")
	for _, want := range []string{"--allowed-endpoints=https://login.example.com,https://*.auth.example:*/realms/*/token", "--allow-assume-role=true"} {
		if !slices.Contains(got, want) {
			t.Errorf("args %q lack %s", got, want)
		}
	}
	if _, err := runHelm(t, "template", release, chartPath, "--set", "allowedEndpoints={login.example.com}"); err == nil {
		t.Error("an endpoint pattern without a scheme passed the schema")
	}
}
