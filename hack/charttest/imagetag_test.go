package charttest

import (
	"strings"
	"testing"
)

// TestChartNumericImageTag: `helm install --set image.tag=7195534` (an all-digit short
// commit hash, or a date tag such as 20261203) reaches the chart as a number, because
// helm's --set reads digits as an integer. The schema takes it as the tag it means, and
// --set-string gives the same image.
func TestChartNumericImageTag(t *testing.T) {
	for name, tc := range map[string]struct {
		flag, tag string
	}{
		"short hash with --set":        {"--set", "7195534"},
		"date tag with --set":          {"--set", "20261203"},
		"short hash with --set-string": {"--set-string", "7195534"},
		"ordinary tag with --set":      {"--set", "v1.2.3"},
	} {
		t.Run(name, func(t *testing.T) {
			out, err := runHelm(t, "template", release, chartPath, "--namespace", releaseNamespace,
				tc.flag, "image.tag="+tc.tag, "--set", "image.repository=registry.example/kafka-mirror")
			if err != nil {
				t.Fatalf("helm template %s image.tag=%s: %v", tc.flag, tc.tag, err)
			}
			objs, err := decodeObjects(strings.NewReader(out))
			if err != nil {
				t.Fatal(err)
			}
			deploy := one(t, objs, "Deployment", fullname)
			want := "registry.example/kafka-mirror:" + tc.tag
			if got := managerContainer(t, deploy)["image"]; got != want {
				t.Errorf("operator image = %v, want %s", got, want)
			}
			if got := deploy.GetLabels()["app.kubernetes.io/version"]; got != tc.tag {
				t.Errorf("app.kubernetes.io/version = %q, want %q", got, tc.tag)
			}
		})
	}
}
