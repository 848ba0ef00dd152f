package main

import (
	"reflect"
	"testing"

	"k8s.io/client-go/rest"

	"github.com/kafka-mirror/kafka-mirror-operator/mirror/cli"
)

func TestSplitNamespaces(t *testing.T) {
	tests := map[string]struct {
		in   string
		want []string
	}{
		"empty watches all": {in: "", want: nil},
		"one":               {in: "team-a", want: []string{"team-a"}},
		"several, spaced":   {in: " team-a, team-b ,,", want: []string{"team-a", "team-b"}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := splitNamespaces(tc.in); !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("splitNamespaces(%q) = %q, want %q", tc.in, got, tc.want)
			}
		})
	}
}

func TestManagerFlagDefaults(t *testing.T) {
	tests := map[string]struct {
		env  map[string]string
		want map[string]string
	}{
		"no environment": {
			want: map[string]string{"engine-image": defaultImageRepository + ":" + cli.Version(), "watch-namespace": "",
				"leader-elect": "false", "metrics-bind-address": ":8080", "health-probe-bind-address": ":8081",
				"metrics-secure": "true", "metrics-cert-dir": "", "allowed-bootstrap-servers": "", "pin-user-id": "true",
				"kube-api-qps": "0", "kube-api-burst": "0", "secret-poll-interval": "30s"},
		},
		"from the environment": {
			env: map[string]string{"KAFKA_MIRROR_IMAGE": "example.com/km:1", "WATCH_NAMESPACE": "a,b", "POD_NAMESPACE": "ops",
				"ALLOWED_BOOTSTRAP_SERVERS": "*.kafka.svc:9092"},
			want: map[string]string{"engine-image": "example.com/km:1", "watch-namespace": "a,b", "leader-election-namespace": "ops",
				"allowed-bootstrap-servers": "*.kafka.svc:9092"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			for _, k := range []string{"KAFKA_MIRROR_IMAGE", "WATCH_NAMESPACE", "POD_NAMESPACE", "ALLOWED_BOOTSTRAP_SERVERS"} {
				t.Setenv(k, tc.env[k])
			}
			flags := newManagerCommand().Flags()
			for flag, want := range tc.want {
				f := flags.Lookup(flag)
				if f == nil {
					t.Fatalf("no --%s flag", flag)
				}
				if f.DefValue != want {
					t.Errorf("--%s defaults to %q, want %q", flag, f.DefValue, want)
				}
			}
		})
	}
}

// TestSetClientLimits: the --kubeconfig path (client-go's 5/s default left in the
// config) and the in-cluster path end with the same limits.
func TestSetClientLimits(t *testing.T) {
	tests := map[string]struct {
		loaded    float32 // QPS as loaded: 0 from clientcmd, -1 from controller-runtime
		qps       float32
		burst     int
		wantQPS   float32
		wantBurst int
	}{
		"kubeconfig, no flags: no client-side limit": {loaded: 0, wantQPS: -1},
		"in cluster, no flags: no client-side limit": {loaded: -1, wantQPS: -1},
		"kubeconfig, qps set, burst derived":         {loaded: 0, qps: 50, wantQPS: 50, wantBurst: 100},
		"in cluster, qps and burst set":              {loaded: -1, qps: 20, burst: 30, wantQPS: 20, wantBurst: 30},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			cfg := &rest.Config{QPS: tc.loaded}
			setClientLimits(cfg, tc.qps, tc.burst)
			if cfg.QPS != tc.wantQPS || cfg.Burst != tc.wantBurst {
				t.Fatalf("QPS %v burst %d, want %v and %d", cfg.QPS, cfg.Burst, tc.wantQPS, tc.wantBurst)
			}
		})
	}
}
