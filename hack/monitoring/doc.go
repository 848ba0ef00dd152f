// Command monitoring generates the Grafana dashboard and the PrometheusRule alerts of
// kafka-mirror from Go code (`make manifests` runs it) and renders the dashboard preview
// picture (`make dashboard-preview`).
//
// The panels and rules are data in this package (panels.go, rules.go). The tests parse
// every PromQL expression with the Prometheus parser, check every metric and label
// against a live scrape of a real engine and a real operator, and run unit tests for
// each alert with the Prometheus rules engine.
//
// Usage, from the repository root:
//
//	cd hack/monitoring && go run . -root ../..            # write config/monitoring and the chart files
//	cd hack/monitoring && go run . -root ../.. -check     # exit 1 if a checked-in file is stale
//	cd hack/monitoring && go run . -root ../.. -preview   # run a mirror for a while, write docs/images/dashboard-preview.png
package main
