package realkafka

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/kafka-mirror/kafka-mirror-operator/internal/engineproc"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"golang.org/x/sync/errgroup"
)

const (
	// DefaultHeap is a broker JVM's -Xmx unless Options.Heap says otherwise: enough for the
	// tests' traffic, small enough for two 3-broker clusters on a shared 2-core machine.
	DefaultHeap = "256m"
	// readyPollInterval is the time between two metadata requests while waiting for brokers.
	readyPollInterval = 200 * time.Millisecond
	// stopGrace is how long a broker gets after SIGTERM for its controlled shutdown
	// (leadership moved away, logs flushed) before it is killed.
	stopGrace = 2 * time.Minute
	// sigtermExitCode is the JVM's exit code after its shutdown hooks ran on SIGTERM.
	sigtermExitCode = 143
	// logTailLines is how many lines of a broker's log LogTails quotes.
	logTailLines = 25
)

// Options describe a cluster. The zero value is one plaintext broker.
type Options struct {
	// Name names the cluster in errors and in its directory ("source", "target").
	Name string
	// Brokers is the number of nodes, each a broker and a KRaft controller: 1 (combined
	// mode, replication factor 1) or 3 (a 3-voter controller quorum; internal topics and
	// the default replication factor 3 with min.insync.replicas 2). Default 1.
	Brokers int
	// Secure adds a SASL_SSL listener with SCRAM-SHA-512 and a test CA, and turns on the
	// StandardAuthorizer (see the package documentation).
	Secure bool
	// Config adds or overrides server.properties entries on every broker.
	Config map[string]string
	// Heap is each JVM's -Xmx. Default DefaultHeap.
	Heap string
	// LogLevel is the brokers' root log4j level. Default $KAFKA_LOG_LEVEL, else WARN
	// (INFO is megabytes per test; set KAFKA_LOG_LEVEL=INFO to see what a broker did).
	LogLevel string
}

// Cluster is a running KRaft cluster of broker JVMs. Its methods are safe for
// concurrent use.
type Cluster struct {
	opts      Options
	jars      string
	dir       string
	clusterID string
	cert      *serverCert

	mu    sync.Mutex // guards each node's proc
	nodes []*node    // nodes[i] has id i+1

	client *kgo.Client
	admin  *kadm.Client
}

// Start starts a cluster with its files under dir and waits until every broker answers
// metadata naming all of them. On error nothing is left running.
func Start(ctx context.Context, dir string, opts Options) (_ *Cluster, err error) {
	if opts.Brokers == 0 {
		opts.Brokers = 1
	}
	if opts.Brokers != 1 && opts.Brokers != 3 {
		return nil, fmt.Errorf("realkafka: Brokers is %d: want 1 (combined mode) or 3 (a controller quorum)", opts.Brokers)
	}
	if opts.Name == "" {
		opts.Name = "kafka"
	}
	if opts.Heap == "" {
		opts.Heap = DefaultHeap
	}
	if opts.LogLevel == "" {
		opts.LogLevel = cmp.Or(os.Getenv("KAFKA_LOG_LEVEL"), "WARN")
	}
	jars, err := Jars()
	if err != nil {
		return nil, err
	}
	c := &Cluster{opts: opts, jars: jars, dir: filepath.Join(dir, opts.Name), clusterID: newClusterID()}
	defer func() {
		if err != nil {
			c.Close()
		}
	}()
	if opts.Secure {
		if c.cert, err = newServerCert(opts.Name); err != nil {
			return nil, err
		}
	}
	if err := c.layOut(); err != nil {
		return nil, err
	}
	if err := c.format(ctx); err != nil {
		return nil, err
	}
	for _, n := range c.nodes {
		if err := c.startNode(n); err != nil {
			return nil, err
		}
	}
	c.client, err = kgo.NewClient(kgo.SeedBrokers(c.Addrs()...))
	if err != nil {
		return nil, fmt.Errorf("realkafka: while creating the %s admin client: %w", opts.Name, err)
	}
	c.admin = kadm.NewClient(c.client)
	if err := c.WaitReady(ctx); err != nil {
		return nil, err
	}
	return c, nil
}

// layOut picks the ports and writes every node's server.properties and the log4j config.
func (c *Cluster) layOut() error {
	perNode := 2
	if c.opts.Secure {
		perNode = 3
	}
	ports, err := freePorts(c.opts.Brokers * perNode)
	if err != nil {
		return err
	}
	for i := range c.opts.Brokers {
		n := &node{id: int32(i + 1), dir: filepath.Join(c.dir, fmt.Sprintf("broker-%d", i+1))}
		n.port, n.controllerPort = ports[i*perNode], ports[i*perNode+1]
		if c.opts.Secure {
			n.securePort = ports[i*perNode+2]
		}
		c.nodes = append(c.nodes, n)
	}
	if err := os.MkdirAll(c.dir, 0o755); err != nil {
		return fmt.Errorf("realkafka: %w", err)
	}
	if c.cert != nil {
		if err := os.WriteFile(c.CAFile(), c.cert.caPEM, 0o644); err != nil {
			return fmt.Errorf("realkafka: while writing the test CA: %w", err)
		}
	}
	log4j := fmt.Sprintf(log4jConfig, c.opts.LogLevel)
	if err := os.WriteFile(c.log4jPath(), []byte(log4j), 0o644); err != nil {
		return fmt.Errorf("realkafka: %w", err)
	}
	for _, n := range c.nodes {
		if err := os.MkdirAll(n.dir, 0o755); err != nil {
			return fmt.Errorf("realkafka: %w", err)
		}
		if err := os.WriteFile(n.propertiesPath(), []byte(renderProperties(c.properties(n))), 0o600); err != nil {
			return fmt.Errorf("realkafka: while writing %s: %w", n.propertiesPath(), err)
		}
	}
	return nil
}

// log4jConfig sends the broker's log to stdout, which engineproc appends to broker.log.
// "Kafka Server started" stays visible at any root level, as a marker in the log.
const log4jConfig = `status = error
appender.out.type = Console
appender.out.name = OUT
appender.out.layout.type = PatternLayout
appender.out.layout.pattern = [%%d] %%p %%m (%%c)%%n
rootLogger.level = %s
rootLogger.appenderRef.out.ref = OUT
logger.raft.name = kafka.server.KafkaRaftServer
logger.raft.level = INFO
`

func (c *Cluster) log4jPath() string { return filepath.Join(c.dir, "log4j2.properties") }

// properties is node n's server.properties.
func (c *Cluster) properties(n *node) map[string]string {
	var voters []string
	for _, o := range c.nodes {
		voters = append(voters, fmt.Sprintf("%d@127.0.0.1:%d", o.id, o.controllerPort))
	}
	rf, minISR := "1", "1"
	if len(c.nodes) == 3 {
		rf, minISR = "3", "2"
	}
	listeners := fmt.Sprintf("PLAINTEXT://127.0.0.1:%d,CONTROLLER://127.0.0.1:%d", n.port, n.controllerPort)
	advertised := fmt.Sprintf("PLAINTEXT://127.0.0.1:%d", n.port)
	protocols := "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT"
	p := map[string]string{
		"process.roles":              "broker,controller",
		"node.id":                    strconv.Itoa(int(n.id)),
		"controller.quorum.voters":   strings.Join(voters, ","),
		"controller.listener.names":  "CONTROLLER",
		"inter.broker.listener.name": "PLAINTEXT",
		"log.dirs":                   n.dataDir(),
		// The engine must never auto-create a topic with a produce (README).
		"auto.create.topics.enable":                        "false",
		"group.initial.rebalance.delay.ms":                 "0",
		"default.replication.factor":                       rf,
		"min.insync.replicas":                              minISR,
		"offsets.topic.replication.factor":                 rf,
		"transaction.state.log.replication.factor":         rf,
		"transaction.state.log.min.isr":                    minISR,
		"share.coordinator.state.topic.replication.factor": rf,
		"share.coordinator.state.topic.min.isr":            minISR,
		// Fewer internal partitions than the defaults (50): quicker to create, the same
		// coordinators.
		"offsets.topic.num.partitions":         "10",
		"transaction.state.log.num.partitions": "10",
		"num.network.threads":                  "2",
		"num.io.threads":                       "4",
		"num.recovery.threads.per.data.dir":    "2",
		// The cleaner's dedupe buffer is heap (128 MiB by default): a small heap needs a
		// small buffer. A short backoff and retention check let a test see the log cleaner
		// and retention act within seconds rather than 15 s and 5 min.
		"log.cleaner.dedupe.buffer.size":  strconv.Itoa(16 << 20),
		"log.cleaner.threads":             "1",
		"log.cleaner.backoff.ms":          "1000",
		"log.retention.check.interval.ms": "2000",
	}
	if c.opts.Secure {
		listeners += fmt.Sprintf(",SASL_SSL://127.0.0.1:%d", n.securePort)
		advertised += fmt.Sprintf(",SASL_SSL://127.0.0.1:%d", n.securePort)
		protocols += ",SASL_SSL:SASL_SSL"
		p["sasl.enabled.mechanisms"] = "SCRAM-SHA-512"
		p["listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config"] = "org.apache.kafka.common.security.scram.ScramLoginModule required;"
		// A PEM key store given inline: a PEM file would need an encrypted key.
		p["ssl.keystore.type"] = "PEM"
		p["ssl.keystore.certificate.chain"] = string(c.cert.certPEM)
		p["ssl.keystore.key"] = string(c.cert.keyPKCS8)
		p["authorizer.class.name"] = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
		// The plaintext and controller listeners authenticate nobody: their principal is
		// User:ANONYMOUS, the brokers' own and the tests' clients.
		p["super.users"] = "User:ANONYMOUS"
	}
	p["listeners"] = listeners
	p["advertised.listeners"] = advertised
	p["listener.security.protocol.map"] = protocols
	for k, v := range c.opts.Config {
		p[k] = v
	}
	return p
}

// renderProperties writes p as a Java properties file, keys sorted.
func renderProperties(p map[string]string) string {
	keys := make([]string, 0, len(p))
	for k := range p {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	esc := strings.NewReplacer(`\`, `\\`, "\n", `\n`, "\r", `\r`)
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, "%s=%s\n", k, esc.Replace(p[k]))
	}
	return b.String()
}

// format writes every node's log directory with the cluster id (StorageTool, what
// bin/kafka-storage.sh format runs), all nodes at once.
func (c *Cluster) format(ctx context.Context) error {
	g, ctx := errgroup.WithContext(ctx)
	for _, n := range c.nodes {
		g.Go(func() error {
			out, err := c.java(ctx, "kafka.tools.StorageTool", "format", "--cluster-id", c.clusterID, "--config", n.propertiesPath()).CombinedOutput()
			if err != nil {
				return fmt.Errorf("realkafka: while formatting the log directory of %s broker %d: %w\n%s", c.opts.Name, n.id, err, tail(string(out), logTailLines))
			}
			return nil
		})
	}
	return g.Wait()
}

// newClusterID is a random Kafka Uuid in its base64 form, as `kafka-storage random-uuid`
// prints.
func newClusterID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[0] &= 0x7f // keep it clear of the reserved ids (zero, and the sentinel ones)
	b[0] |= 0x10
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// Ports for brokers are chosen below the kernel's ephemeral range (32768 and up by
// default, /proc/sys/net/ipv4/ip_local_port_range): a port picked from that range and
// released until the JVM binds it could meanwhile become the local port of any outgoing
// connection on a busy machine, and a broker failed to start with "Address already in
// use". Below it, only a listener that picked the same port can collide.
const (
	portRangeLow  = 20000
	portRangeHigh = 32767
)

var (
	portsMu sync.Mutex
	// portsTaken holds every port handed out in this process, so that two clusters
	// starting at the same time never get the same one.
	portsTaken = map[int]bool{}
)

// freePorts picks n distinct loopback ports that were free when tried and that no
// cluster of this process was given before.
func freePorts(n int) ([]int, error) {
	portsMu.Lock()
	defer portsMu.Unlock()
	var ports []int
	for tries := 0; len(ports) < n; tries++ {
		if tries > 1000 {
			return nil, fmt.Errorf("realkafka: found only %d free ports in %d-%d", len(ports), portRangeLow, portRangeHigh)
		}
		port := portRangeLow + mrand.IntN(portRangeHigh-portRangeLow+1)
		if portsTaken[port] {
			continue
		}
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err != nil {
			continue
		}
		l.Close()
		portsTaken[port] = true
		ports = append(ports, port)
	}
	return ports, nil
}

// Name is Options.Name.
func (c *Cluster) Name() string { return c.opts.Name }

// IDs are the broker (node) ids, 1 to Brokers.
func (c *Cluster) IDs() []int32 {
	ids := make([]int32, len(c.nodes))
	for i, n := range c.nodes {
		ids[i] = n.id
	}
	return ids
}

// Addrs are the plaintext listeners' addresses, one per broker. On a secure cluster
// their clients are the super user User:ANONYMOUS.
func (c *Cluster) Addrs() []string {
	var out []string
	for _, n := range c.nodes {
		out = append(out, fmt.Sprintf("127.0.0.1:%d", n.port))
	}
	return out
}

// SecureAddrs are the SASL_SSL listeners' addresses (nil unless Options.Secure).
func (c *Cluster) SecureAddrs() []string {
	if !c.opts.Secure {
		return nil
	}
	var out []string
	for _, n := range c.nodes {
		out = append(out, fmt.Sprintf("127.0.0.1:%d", n.securePort))
	}
	return out
}

// CAFile is the PEM file of the CA that signed the SASL_SSL listener's certificate.
func (c *Cluster) CAFile() string { return filepath.Join(c.dir, "ca.pem") }

// Client is a kgo client of the plaintext listeners, for requests kadm does not wrap.
func (c *Cluster) Client() *kgo.Client { return c.client }

// Admin is a kadm client of the plaintext listeners (a super user on a secure cluster).
func (c *Cluster) Admin() *kadm.Client { return c.admin }

// node returns the node with id, or an error naming the ids there are.
func (c *Cluster) node(id int32) (*node, error) {
	if id < 1 || int(id) > len(c.nodes) {
		return nil, fmt.Errorf("realkafka: %s has no broker %d (ids 1 to %d)", c.opts.Name, id, len(c.nodes))
	}
	return c.nodes[id-1], nil
}

// Kill ends broker id with SIGKILL: no controlled shutdown, no flush, its leaderships
// move only when the controller misses its heartbeats.
func (c *Cluster) Kill(id int32) error {
	n, err := c.node(id)
	if err != nil {
		return err
	}
	c.mu.Lock()
	p := n.proc
	n.expectRunning = false
	c.mu.Unlock()
	if p == nil {
		return nil
	}
	return p.Kill()
}

// Stop stops broker id with SIGTERM, a controlled shutdown (its leaderships move first),
// and waits for it to exit.
func (c *Cluster) Stop(id int32) error {
	n, err := c.node(id)
	if err != nil {
		return err
	}
	c.mu.Lock()
	p := n.proc
	n.expectRunning = false
	c.mu.Unlock()
	if p == nil || !p.Running() {
		return nil
	}
	if err := p.Stop(stopGrace); err != nil && p.ExitCode() != sigtermExitCode {
		return fmt.Errorf("realkafka: %s broker %d did not stop cleanly: %w\n%s", c.opts.Name, id, err, p.LogTail(logTailLines))
	}
	return nil
}

// Restart starts broker id again (after Kill or Stop) on the same ports and log
// directory, and waits until every running broker's metadata names it again.
func (c *Cluster) Restart(ctx context.Context, id int32) error {
	n, err := c.node(id)
	if err != nil {
		return err
	}
	c.mu.Lock()
	running := n.proc != nil && n.proc.Running()
	c.mu.Unlock()
	if running {
		return fmt.Errorf("realkafka: %s broker %d is still running: Kill or Stop it first", c.opts.Name, id)
	}
	if err := c.startNode(n); err != nil {
		return err
	}
	return c.WaitReady(ctx)
}

// RestartAll starts every broker that is not running (after a whole-cluster outage:
// restarted one at a time, none would find a controller quorum) and waits until all
// are ready.
func (c *Cluster) RestartAll(ctx context.Context) error {
	for _, n := range c.nodes {
		if !c.Running(n.id) {
			if err := c.startNode(n); err != nil {
				return err
			}
		}
	}
	return c.WaitReady(ctx)
}

// Running reports whether broker id's process runs.
func (c *Cluster) Running(id int32) bool {
	n, err := c.node(id)
	if err != nil {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return n.proc != nil && n.proc.Running()
}

// WaitReady waits until every running broker answers a metadata request that names every
// running broker (a broker the controller still fences is not named). It fails early
// when a broker process exits.
func (c *Cluster) WaitReady(ctx context.Context) error {
	var last error
	for {
		if last = c.ready(ctx); last == nil {
			return nil
		}
		if errors.Is(last, errExited) {
			return last
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("realkafka: %s was not ready: %w (last: %v)", c.opts.Name, ctx.Err(), last)
		case <-time.After(readyPollInterval):
		}
	}
}

var errExited = errors.New("exited")

// ready checks once what WaitReady waits for.
func (c *Cluster) ready(ctx context.Context) error {
	var running []*node
	c.mu.Lock()
	for _, n := range c.nodes {
		if n.proc != nil && n.proc.Running() {
			running = append(running, n)
		} else if n.proc != nil && n.expectRunning {
			c.mu.Unlock()
			return fmt.Errorf("realkafka: %s broker %d %w (%v); its log ends:\n%s", c.opts.Name, n.id, errExited, n.proc.Err(), n.proc.LogTail(logTailLines))
		}
	}
	c.mu.Unlock()
	var want []int32
	for _, n := range running {
		want = append(want, n.id)
	}
	for _, n := range running {
		got, err := brokersSeenBy(ctx, n)
		if err != nil {
			return fmt.Errorf("broker %d: %w", n.id, err)
		}
		for _, id := range want {
			if !slices.Contains(got, id) {
				return fmt.Errorf("broker %d does not list broker %d yet (lists %v)", n.id, id, got)
			}
		}
	}
	return nil
}

// brokersSeenBy asks broker n alone for metadata and returns the broker ids it names.
func brokersSeenBy(ctx context.Context, n *node) ([]int32, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(n.addr()), kgo.RequestRetries(0))
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	resp, err := cl.SeedBrokers()[0].Request(ctx, kmsg.NewPtrMetadataRequest())
	if err != nil {
		return nil, err
	}
	var ids []int32
	for _, b := range resp.(*kmsg.MetadataResponse).Brokers {
		ids = append(ids, b.NodeID)
	}
	return ids, nil
}

// Leader returns the id of the broker leading topic's partition, as the cluster's
// metadata says now (-1 while it has none).
func (c *Cluster) Leader(ctx context.Context, topic string, partition int32) (int32, error) {
	md, err := c.admin.Metadata(ctx, topic)
	if err != nil {
		return -1, fmt.Errorf("realkafka: while reading the metadata of %s on %s: %w", topic, c.opts.Name, err)
	}
	td, ok := md.Topics[topic]
	if !ok || td.Err != nil {
		return -1, fmt.Errorf("realkafka: topic %s on %s: %v", topic, c.opts.Name, td.Err)
	}
	pd, ok := td.Partitions[partition]
	if !ok {
		return -1, fmt.Errorf("realkafka: topic %s on %s has no partition %d", topic, c.opts.Name, partition)
	}
	return pd.Leader, nil
}

// WaitInSync waits until every partition of topics (every topic, internal ones included,
// when none are named) has a leader and all its replicas in sync: what a rolling
// restart waits for before it takes the next broker down.
func (c *Cluster) WaitInSync(ctx context.Context, topics ...string) error {
	var last string
	for {
		md, err := c.admin.Metadata(ctx, topics...)
		if err == nil {
			last = ""
			for _, td := range md.Topics {
				for _, pd := range td.Partitions {
					if pd.Leader < 0 || len(pd.ISR) < len(pd.Replicas) {
						last = fmt.Sprintf("%s/%d has leader %d, replicas %v, in sync %v", td.Topic, pd.Partition, pd.Leader, pd.Replicas, pd.ISR)
					}
				}
			}
			if last == "" {
				return nil
			}
		} else {
			last = err.Error()
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("realkafka: %s: partitions not in sync: %w (%s)", c.opts.Name, ctx.Err(), last)
		case <-time.After(readyPollInterval):
		}
	}
}

// LogTails returns the last lines of every broker's log, for a failed test.
func (c *Cluster) LogTails() string {
	var b strings.Builder
	for _, n := range c.nodes {
		t, err := engineproc.TailFile(n.logPath(), logTailLines)
		if err != nil {
			t = err.Error()
		}
		fmt.Fprintf(&b, "--- %s broker %d (%s) ---\n%s\n", c.opts.Name, n.id, n.logPath(), t)
	}
	return b.String()
}

// Close kills every broker (the data is discarded with the directory) and closes the
// clients. It is safe to call more than once.
func (c *Cluster) Close() {
	if c.client != nil {
		c.client.Close()
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, n := range c.nodes {
		n.expectRunning = false
		if n.proc != nil {
			_ = n.proc.Kill()
		}
	}
}
