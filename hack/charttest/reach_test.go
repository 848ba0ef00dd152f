package charttest

import (
	"slices"
	"testing"
)

// TestChartEndpointAllowList: allowedEndpoints, allowAssumeRole and refusePrivilegedPods
// become the operator's --allowed-endpoints, --allow-assume-role and --refuse-privileged-pods; by default neither is passed (no endpoint
// list, roles refused).
func TestChartEndpointAllowList(t *testing.T) {
	args := func(set ...string) []string {
		return stringList(managerContainer(t, one(t, renderChart(t, release, releaseNamespace, set...), "Deployment", fullname))["args"])
	}
	for _, a := range args() {
		if a == "--allow-assume-role=true" || a == "--refuse-privileged-pods=true" || len(a) > 19 && a[:19] == "--allowed-endpoints" {
			t.Errorf("default values pass %s", a)
		}
	}
	got := args(`allowedEndpoints={https://login.example.com,https://*.auth.example:*/realms/*/token}`, "allowAssumeRole=true", "refusePrivilegedPods=true")
	for _, want := range []string{"--refuse-privileged-pods=true", "--allowed-endpoints=https://login.example.com,https://*.auth.example:*/realms/*/token", "--allow-assume-role=true"} {
		if !slices.Contains(got, want) {
			t.Errorf("args %q lack %s", got, want)
		}
	}
	if _, err := runHelm(t, "template", release, chartPath, "--set", "allowedEndpoints={login.example.com}"); err == nil {
		t.Error("an endpoint pattern without a scheme passed the schema")
	}
}
