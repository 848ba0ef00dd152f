// This module generates and tests the Grafana dashboard and the PrometheusRule
// (config/monitoring, the chart's monitoring templates). It is separate so that the
// Grafana SDK, the Prometheus server module and the plotting library stay out of the
// product's go.mod.
module github.com/kafka-mirror/kafka-mirror-operator/hack/monitoring

go 1.26.7

require (
	github.com/grafana/grafana-foundation-sdk/go v0.0.22
	sigs.k8s.io/yaml v1.6.0
)

require (
	github.com/google/go-cmp v0.7.0 // indirect
	go.yaml.in/yaml/v2 v2.4.4 // indirect
	go.yaml.in/yaml/v3 v3.0.5 // indirect
)

replace github.com/kafka-mirror/kafka-mirror-operator => ../..
