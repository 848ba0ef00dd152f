package realkafka

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/kafka-mirror/kafka-mirror-operator/internal/engineproc"
)

// node is one broker JVM (broker and KRaft controller in one process) and its files.
type node struct {
	id             int32
	dir            string
	port           int // PLAINTEXT: inter-broker traffic and the tests' own clients
	controllerPort int
	securePort     int // SASL_SSL, 0 unless Options.Secure

	// proc is the running (or last) JVM; expectRunning is false once Kill or Stop was
	// asked for, so that WaitReady tells a broker that crashed from one a test took down.
	// Both are guarded by Cluster.mu.
	proc          *engineproc.Process
	expectRunning bool
}

func (n *node) addr() string           { return fmt.Sprintf("127.0.0.1:%d", n.port) }
func (n *node) propertiesPath() string { return filepath.Join(n.dir, "server.properties") }
func (n *node) dataDir() string        { return filepath.Join(n.dir, "data") }
func (n *node) logPath() string        { return filepath.Join(n.dir, "broker.log") }

// jvmFlags start a broker quickly and keep it small: a fixed small heap, the serial
// collector (no GC threads competing for 2 cores) and the C1 compiler only (a broker
// under test traffic never needs C2's peak, and starts seconds sooner without it).
func (c *Cluster) jvmFlags() []string {
	return []string{
		"-Xmx" + c.opts.Heap, "-Xms64m",
		"-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-XX:+ExitOnOutOfMemoryError",
		"-Djava.awt.headless=true",
		"-Dlog4j2.configurationFile=" + c.log4jPath(),
	}
}

// java is a JVM command running class main with args on the cluster's classpath.
func (c *Cluster) java(ctx context.Context, main string, args ...string) *exec.Cmd {
	bin := "java"
	if home := os.Getenv("JAVA_HOME"); home != "" {
		bin = filepath.Join(home, "bin", "java")
	}
	argv := append(c.jvmFlags(), "-cp", filepath.Join(c.jars, "*"), main)
	return exec.CommandContext(ctx, bin, append(argv, args...)...)
}

// startNode starts node n's JVM (kafka.Kafka, what bin/kafka-server-start.sh runs) with
// its output appended to its broker.log.
func (c *Cluster) startNode(n *node) error {
	cmd := c.java(context.Background(), "kafka.Kafka", n.propertiesPath())
	p, err := engineproc.Start(cmd, engineproc.Options{LogPath: n.logPath()})
	if err != nil {
		return fmt.Errorf("realkafka: while starting %s broker %d: %w", c.opts.Name, n.id, err)
	}
	c.mu.Lock()
	n.proc, n.expectRunning = p, true
	c.mu.Unlock()
	return nil
}

// tail returns the last n lines of s.
func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
