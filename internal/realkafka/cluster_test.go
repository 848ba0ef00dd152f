//go:build kafka

package realkafka

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// produceSync writes n records "<prefix>-<i>" to topic and fails the test on any error.
func produceSync(t *testing.T, ctx context.Context, cl *kgo.Client, topic, prefix string, n int) {
	t.Helper()
	for i := range n {
		r := &kgo.Record{Topic: topic, Value: []byte(fmt.Sprintf("%s-%d", prefix, i))}
		if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatalf("producing to %s: %v", topic, err)
		}
	}
}

// consumeAll reads topic from the start until want records arrived.
func consumeAll(t *testing.T, ctx context.Context, addrs []string, topic string, want int) []string {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addrs...), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var got []string
	for len(got) < want {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read %d of %d records of %s: %v", len(got), want, topic, ctx.Err())
		}
		fs.EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
	}
	return got
}

// TestSingleBrokerSurvivesRestarts: a combined-mode broker takes records, keeps them over
// a clean stop and over a kill -9, on the same address each time.
func TestSingleBrokerSurvivesRestarts(t *testing.T) {
	c := StartTest(t, Options{Name: "single"})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if _, err := c.Admin().CreateTopic(ctx, 2, 1, nil, "t"); err != nil {
		t.Fatal(err)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.Addrs()...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	produceSync(t, ctx, cl, "t", "before", 100)
	if err := c.Stop(1); err != nil {
		t.Fatal(err)
	}
	if c.Running(1) {
		t.Fatal("broker 1 still runs after Stop")
	}
	if err := c.Restart(ctx, 1); err != nil {
		t.Fatal(err)
	}
	produceSync(t, ctx, cl, "t", "after-stop", 100)
	if err := c.Kill(1); err != nil {
		t.Fatal(err)
	}
	if err := c.Restart(ctx, 1); err != nil {
		t.Fatal(err)
	}
	produceSync(t, ctx, cl, "t", "after-kill", 100)
	if got := consumeAll(t, ctx, c.Addrs(), "t", 300); len(got) != 300 {
		t.Fatalf("read %d records, want 300", len(got))
	}
}

// TestLeaderKillMovesLeadership: on 3 brokers, kill -9 of a partition's leader makes
// another in-sync replica the leader; the killed broker comes back and catches up.
func TestLeaderKillMovesLeadership(t *testing.T) {
	c := StartTest(t, Options{Name: "three", Brokers: 3})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if _, err := c.Admin().CreateTopic(ctx, 1, 3, nil, "t"); err != nil {
		t.Fatal(err)
	}
	if err := c.WaitInSync(ctx, "t"); err != nil {
		t.Fatal(err)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.Addrs()...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	produceSync(t, ctx, cl, "t", "before", 50)
	leader, err := c.Leader(ctx, "t", 0)
	if err != nil || leader < 1 {
		t.Fatalf("leader of t/0: %d, %v", leader, err)
	}
	if err := c.Kill(leader); err != nil {
		t.Fatal(err)
	}
	produceSync(t, ctx, cl, "t", "during", 50) // acks=all with min.insync.replicas 2 of the 2 left
	now, err := c.Leader(ctx, "t", 0)
	if err != nil || now == leader || now < 1 {
		t.Fatalf("leader of t/0 after killing broker %d: %d, %v", leader, now, err)
	}
	if err := c.Restart(ctx, leader); err != nil {
		t.Fatal(err)
	}
	if err := c.WaitInSync(ctx, "t"); err != nil {
		t.Fatal(err)
	}
	if got := consumeAll(t, ctx, c.Addrs(), "t", 100); len(got) != 100 {
		t.Fatalf("read %d records, want 100", len(got))
	}
}

// TestSecureListenerAuthorizes: the SASL_SSL listener accepts a SCRAM-SHA-512 user over
// TLS verified against CAFile, refuses a wrong password, and the StandardAuthorizer lets
// the user write only where an ACL allows it.
func TestSecureListenerAuthorizes(t *testing.T) {
	c := StartTest(t, Options{Name: "secure", Secure: true})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if _, err := c.Admin().CreateTopics(ctx, 1, 1, nil, "allowed", "denied"); err != nil {
		t.Fatal(err)
	}
	if err := c.AddSCRAMUser(ctx, "mirror", "s3cret"); err != nil {
		t.Fatal(err)
	}
	err := c.Grant(ctx,
		ACL{Principal: "User:mirror", Resource: kmsg.ACLResourceTypeTopic, Name: "allowed", Operation: kadm.OpWrite},
		ACL{Principal: "User:mirror", Resource: kmsg.ACLResourceTypeTopic, Name: "allowed", Operation: kadm.OpDescribe})
	if err != nil {
		t.Fatal(err)
	}
	pem, err := os.ReadFile(c.CAFile())
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pem)
	client := func(password string) *kgo.Client {
		cl, err := kgo.NewClient(kgo.SeedBrokers(c.SecureAddrs()...),
			kgo.DialTLSConfig(&tls.Config{RootCAs: pool}),
			kgo.SASL(scram.Auth{User: "mirror", Pass: password}.AsSha512Mechanism()),
			kgo.RequestRetries(2), kgo.RecordDeliveryTimeout(20*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(cl.Close)
		return cl
	}
	good := client("s3cret")
	produceSync(t, ctx, good, "allowed", "ok", 10)
	err = good.ProduceSync(ctx, &kgo.Record{Topic: "denied", Value: []byte("x")}).FirstErr()
	if !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("producing to a topic without an ACL: %v, want TOPIC_AUTHORIZATION_FAILED", err)
	}
	err = client("wrong").ProduceSync(ctx, &kgo.Record{Topic: "allowed", Value: []byte("x")}).FirstErr()
	if !errors.Is(err, kerr.SaslAuthenticationFailed) {
		t.Fatalf("producing with a wrong password: %v, want SASL_AUTHENTICATION_FAILED", err)
	}
}
