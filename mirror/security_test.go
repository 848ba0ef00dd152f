package mirror

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/kafka-mirror/kafka-mirror-operator/internal/testutil"
	"github.com/kafka-mirror/kafka-mirror-operator/mirror/config"
)

// TestMirrorFromSASLSource mirrors from a source that requires SCRAM-SHA-512, with the
// password read from a file as the config names it.
func TestMirrorFromSASLSource(t *testing.T) {
	const user, password = "mirror", "s3cret-Password"
	src, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.EnableSASL(),
		kfake.Superuser(config.SASLSCRAMSHA512, user, password), kfake.SeedTopics(2, testTopic))
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	tgt, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	defer tgt.Close()

	prod, err := kgo.NewClient(kgo.SeedBrokers(src.ListenAddrs()...),
		kgo.SASL(scram.Auth{User: user, Pass: password}.AsSha512Mechanism()))
	if err != nil {
		t.Fatal(err)
	}
	var recs []*kgo.Record
	for i := 0; i < 500; i++ {
		recs = append(recs, &kgo.Record{Topic: testTopic, Value: []byte("v")})
	}
	if err := prod.ProduceSync(t.Context(), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	prod.Close()

	pwFile := filepath.Join(t.TempDir(), "password")
	if err := os.WriteFile(pwFile, []byte(password+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c := &testClusters{source: src, target: tgt}
	cfg := c.testConfig(t, func(cfg *config.Config) {
		cfg.Source.SASL = &config.SASL{Mechanism: config.SASLSCRAMSHA512, Username: user, PasswordFile: pwFile}
	})
	r := startEngine(t, cfg, testLogger(t))
	got := readTarget(t, tgt, testTopic, 500, time.Second, 30*time.Second)
	if n := len(got[0]) + len(got[1]); n != 500 {
		t.Fatalf("target holds %d records, want 500", n)
	}
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}

	// The same source with a wrong password: the engine keeps retrying to connect, is
	// not ready and says why, naming the source and its password file. Each attempt
	// reads the file again, so correcting it (as a corrected Secret is updated in the
	// pod's volume) lets the engine start without a restart.
	if err := os.WriteFile(pwFile, []byte("wrong"), 0o600); err != nil {
		t.Fatal(err)
	}
	r = startEngine(t, cfg, testLogger(t))
	time.Sleep(1500 * time.Millisecond)
	select {
	case <-r.done:
		t.Fatalf("Run returned with a wrong password: %v; want it to keep retrying", r.err)
	default:
	}
	err = r.e.Ready()
	if err == nil || !strings.Contains(err.Error(), "while connecting to the source cluster") || !strings.Contains(err.Error(), "source.sasl.passwordFile") {
		t.Fatalf("Ready() with a wrong password = %v, want an error naming the source cluster and its password file", err)
	}
	if err := os.WriteFile(pwFile, []byte(password+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, 90*time.Second, "ready after the password was corrected", func() bool { return r.e.Ready() == nil })
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
}

// TestNoSelectedTopicIsNotReady starts an engine whose selection matches nothing: it
// keeps running, is not ready, and says why.
func TestNoSelectedTopicIsNotReady(t *testing.T) {
	c := newClusters(t, 1)
	cfg := c.testConfig(t, func(cfg *config.Config) { cfg.Topics.Include = []string{"nothing\\..*"} })
	r := startEngine(t, cfg, testLogger(t))
	time.Sleep(1500 * time.Millisecond)
	err := r.e.Ready()
	if err == nil || !strings.Contains(err.Error(), "no source topic matches topics.include") {
		t.Fatalf("Ready() = %v, want it to say no topic matches", err)
	}
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
}
