package main

import (
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/kafka-mirror/kafka-mirror-operator/controllers"
	"github.com/kafka-mirror/kafka-mirror-operator/mirror/cli"
)

// defaultImageRepository is where release images are published; the default engine
// image is this repository at the binary's own version, i.e. the operator's own image.
const defaultImageRepository = "ghcr.io/kafka-mirror/kafka-mirror"

type managerOptions struct {
	kubeconfig       string
	watchNamespace   string
	allowedBootstrap string
	allowedEndpoints string
	pinUserID        bool
	kubeAPIQPS       float32
	kubeAPIBurst     int
	controllers.ManagerOptions
}

// newManagerCommand runs the operator: it reconciles KafkaMirrors into mirror
// Deployments and keeps their target topics in sync.
func newManagerCommand() *cobra.Command {
	o := &managerOptions{}
	cmd := &cobra.Command{
		Use:   "manager",
		Short: "Run the operator that turns KafkaMirror resources into running mirrors",
		Long: `manager runs the kafka-mirror operator. It reconciles KafkaMirror resources:
validates them, creates and expands target topics to match the source's partition
counts, and runs the mirror engine as a Deployment from a rendered mirror.yaml.

The mirror pods use --engine-image, by default this binary's own image: one image
holds operator and engine.`,
		Example: `  # In the cluster, as the Helm chart and config/default run it
  kafka-mirror manager --leader-elect --watch-namespace team-a,team-b

  # From a workstation against the current kubeconfig context, for development
  kafka-mirror manager --kubeconfig ~/.kube/config --metrics-bind-address 0`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return o.run(cmd) },
	}
	f := cmd.Flags()
	f.StringVar(&o.kubeconfig, "kubeconfig", "", "path to a kubeconfig; default: in-cluster config, then $KUBECONFIG, then ~/.kube/config")
	f.StringVar(&o.Image, "engine-image", envOr("KAFKA_MIRROR_IMAGE", defaultImageRepository+":"+cli.Version()),
		"image of the mirror pods when a KafkaMirror sets no spec.pod.image (env KAFKA_MIRROR_IMAGE)")
	f.StringVar(&o.watchNamespace, "watch-namespace", os.Getenv("WATCH_NAMESPACE"),
		"comma-separated namespaces to watch; empty watches all (env WATCH_NAMESPACE)")
	f.StringVar(&o.MetricsAddress, "metrics-bind-address", ":8080", `address of the operator's /metrics; "0" turns it off`)
	f.BoolVar(&o.SecureMetrics, "metrics-secure", true,
		"serve /metrics over HTTPS to clients whose Kubernetes token may get the nonResourceURL /metrics (TokenReview, SubjectAccessReview); false serves plain HTTP to anyone")
	f.StringVar(&o.MetricsCertDir, "metrics-cert-dir", "",
		"directory with tls.crt and tls.key for the HTTPS /metrics; empty: a self-signed certificate generated in memory")
	f.StringVar(&o.allowedBootstrap, "allowed-bootstrap-servers", os.Getenv("ALLOWED_BOOTSTRAP_SERVERS"),
		"comma-separated host:port patterns (* matches any characters but ':', e.g. *.kafka.svc:9092,kafka-*.example.com:*) a KafkaMirror's bootstrap servers must match; empty allows any (env ALLOWED_BOOTSTRAP_SERVERS)")
	f.StringVar(&o.allowedEndpoints, "allowed-endpoints", os.Getenv("ALLOWED_ENDPOINTS"),
		"comma-separated URL patterns (https://host[:port][/path]; * matches any characters but ':' and '/' in the host and port, any in the path) every endpoint a KafkaMirror names (sasl.oauth.tokenUrl) must match; with --allowed-bootstrap-servers set and this empty, every endpoint is refused (env ALLOWED_ENDPOINTS)")
	f.BoolVar(&o.AllowAssumeRole, "allow-assume-role", false,
		"let the operator's topic sync assume a KafkaMirror's sasl.aws.roleArn with the operator's own AWS identity; false stalls such a KafkaMirror (AssumeRoleNotAllowed)")
	f.BoolVar(&o.RefusePrivilegedPods, "refuse-privileged-pods", false,
		"stall a KafkaMirror whose spec.pod settings go beyond the restricted Pod Security Standard (privileged, added capabilities, root, hostPath volumes, ...), naming each field (PrivilegedPodNotAllowed)")
	f.StringVar(&o.HealthProbeAddress, "health-probe-bind-address", ":8081", `address of /healthz and /readyz; "0" turns them off`)
	f.BoolVar(&o.LeaderElection, "leader-elect", false, "elect one active replica through a Lease (turn on when running more than one replica)")
	f.StringVar(&o.LeaderElectionNamespace, "leader-election-namespace", os.Getenv("POD_NAMESPACE"),
		"namespace of the leader-election Lease; default: the operator's own namespace (env POD_NAMESPACE)")
	f.BoolVar(&o.pinUserID, "pin-user-id", true,
		"run the mirror pods as UID/GID 65532 (the image's nonroot user); false leaves runAsUser, runAsGroup and fsGroup unset for the platform to assign (OpenShift restricted-v2)")
	f.IntVar(&o.MaxConcurrentReconciles, "max-concurrent-reconciles", 4, "KafkaMirrors reconciled at once")
	f.DurationVar(&o.SecretPollInterval, "secret-poll-interval", controllers.DefaultSecretPollInterval,
		"how often the operator reads the metadata of the Secrets KafkaMirrors reference, to roll the mirror pods when one changes (it never lists or watches Secrets)")
	f.Float32Var(&o.kubeAPIQPS, "kube-api-qps", 0,
		"requests per second the operator sends to the Kubernetes API server, in the cluster and with --kubeconfig alike; 0 sets no client-side limit (the API server's priority and fairness governs), as controller-runtime does in a cluster")
	f.IntVar(&o.kubeAPIBurst, "kube-api-burst", 0, "requests the operator may send at once above --kube-api-qps; 0: twice --kube-api-qps")
	return cmd
}

func (o *managerOptions) run(cmd *cobra.Command) error {
	log, err := cli.NewLogger(cmd)
	if err != nil {
		return err
	}
	// controller-runtime and client-go (leader election) log through the same logger.
	ctrl.SetLogger(log)
	klog.SetLogger(log)
	o.Logger = log

	o.WatchNamespaces = splitNamespaces(o.watchNamespace)
	o.AllowedBootstrapServers = splitNamespaces(o.allowedBootstrap)
	o.AllowedEndpoints = splitNamespaces(o.allowedEndpoints)
	o.LeaveUserIDUnset = !o.pinUserID
	var cfg *rest.Config
	if o.kubeconfig != "" {
		cfg, err = clientcmd.BuildConfigFromFlags("", o.kubeconfig)
	} else {
		cfg, err = ctrl.GetConfig()
	}
	if err != nil {
		return fmt.Errorf("while loading the Kubernetes client config: %w", err)
	}
	setClientLimits(cfg, o.kubeAPIQPS, o.kubeAPIBurst)
	mgr, err := controllers.NewManager(cfg, o.ManagerOptions)
	if err != nil {
		return err
	}
	log.Info("Configured the operator", "version", cli.Version(), "engineImage", o.Image,
		"watchNamespaces", o.WatchNamespaces, "leaderElection", o.LeaderElection,
		"secureMetrics", o.SecureMetrics, "allowedBootstrapServers", o.AllowedBootstrapServers,
		"allowedEndpoints", o.AllowedEndpoints, "allowAssumeRole", o.AllowAssumeRole)
	if err := mgr.Start(cmd.Context()); err != nil {
		return fmt.Errorf("while running the manager: %w", err)
	}
	log.Info("Stopped the operator")
	return nil
}

// setClientLimits gives cfg the same client-side rate limit whichever way it was
// loaded: clientcmd (--kubeconfig) leaves client-go's default of 5 requests/s (burst
// 10), which at a few hundred KafkaMirrors throttles the operator to seconds per
// reconcile, while controller-runtime's in-cluster loading turns the limit off. qps 0
// turns it off on both paths; qps > 0 sets it, with burst (0: 2 x qps).
func setClientLimits(cfg *rest.Config, qps float32, burst int) {
	if qps <= 0 {
		cfg.QPS, cfg.Burst = -1, 0
		return
	}
	if burst <= 0 {
		burst = int(2 * qps)
	}
	cfg.QPS, cfg.Burst = qps, max(burst, 1)
}

// envOr returns the environment variable key, or def when it is unset or empty.
func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

// splitNamespaces parses --watch-namespace and --allowed-bootstrap-servers: a
// comma-separated list, blanks ignored.
func splitNamespaces(s string) []string {
	var out []string
	for _, ns := range strings.Split(s, ",") {
		if ns = strings.TrimSpace(ns); ns != "" {
			out = append(out, ns)
		}
	}
	return out
}
