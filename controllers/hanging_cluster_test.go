package controllers

import (
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kafka-mirror/kafka-mirror-operator/api/v1alpha1"
	"github.com/kafka-mirror/kafka-mirror-operator/internal/testutil"
)

// hangingListener accepts TCP connections and never answers: unlike a refused
// connection, it holds a Kafka client until its read timeout.
func hangingListener(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	conns := make(chan net.Conn, 1024)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			conns <- c
		}
	}()
	t.Cleanup(func() {
		_ = ln.Close()
		close(conns)
		for c := range conns {
			_ = c.Close()
		}
	})
	return ln.Addr().String()
}

// TestHangingClusterDelaysOnlyItsOwnMirror: more KafkaMirrors on clusters that accept
// TCP and never answer than the manager has workers do not delay another
// KafkaMirror's spec change, and each of them is reported unreachable within the
// topic sync's deadline instead of after sarama's own timeouts.
func TestHangingClusterDelaysOnlyItsOwnMirror(t *testing.T) {
	requireEnv(t)
	t.Parallel()
	const ns = "t-hang"
	// The suite's manager has 4 workers; before issue 21 each of these held one for
	// about 45 s (a dial, then a read timeout per metadata attempt).
	const hangingMirrors = 6
	createTopic(t, kafkaAdmin(t, env.source), "hang.a", 1)
	create(t, testMirror(ns, "healthy", `hang\..*`))
	waitCondition(t, ns, "healthy", v1alpha1.ConditionTopicsSynced, metav1.ConditionTrue, v1alpha1.ReasonTopicsInSync)

	created := time.Now()
	for i := range hangingMirrors {
		addr := hangingListener(t)
		create(t, testMirror(ns, fmt.Sprintf("hanging-%d", i), `.*`, func(m *v1alpha1.KafkaMirror) {
			m.Spec.Source.BootstrapServers = []string{addr}
		}))
	}
	// Their syncs are under way (and, before the fix, their reconciles held every worker).
	time.Sleep(2 * time.Second)

	// A healthy cluster's spec change is reconciled in about a second on a busy
	// machine; a hanging dial takes kafkaRequestTimeout (15 s) at least. The ceiling
	// sits well below that.
	const ceiling = kafkaRequestTimeout / 2
	changed := time.Now()
	updateMirror(t, ns, "healthy", func(m *v1alpha1.KafkaMirror) { m.Spec.Streams = 2 })
	testutil.Eventually(t, ceiling, func() error {
		m := &v1alpha1.KafkaMirror{}
		if err := get(m, ns, "healthy"); err != nil {
			return err
		}
		if m.Spec.Streams != 2 || m.Status.ObservedGeneration != m.Generation {
			return fmt.Errorf("generation %d not observed (status at %d)", m.Generation, m.Status.ObservedGeneration)
		}
		return nil
	})
	t.Logf("spec change reconciled in %s with %d mirrors on hanging clusters", time.Since(changed).Round(time.Millisecond), hangingMirrors)
	cm, err := configInclude(ns, "healthy")
	if err != nil {
		t.Fatal(err)
	}
	expect(t, "healthy include", fmt.Sprint(cm), `[hang\..*]`)

	// The hanging ones are reported within the sync deadline (plus the wait for a
	// per-cluster slot: each has its own listener, so none waits).
	for i := range hangingMirrors {
		name := fmt.Sprintf("hanging-%d", i)
		_, c := waitCondition(t, ns, name, v1alpha1.ConditionTopicsSynced, metav1.ConditionFalse, v1alpha1.ReasonSourceUnreachable)
		if !strings.Contains(c.Message, "did not answer within") {
			t.Errorf("%s: message %q, want the sync deadline named", name, c.Message)
		}
	}
	if took := time.Since(created); took > 3*kafkaSyncTimeout {
		t.Errorf("the hanging clusters were reported after %s, want within the %s deadline (ceiling 3x)", took, kafkaSyncTimeout)
	}
}
