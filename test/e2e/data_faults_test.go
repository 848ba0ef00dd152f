//go:build e2e

package e2e

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kafka-mirror/kafka-mirror-operator/internal/audit"
	"github.com/kafka-mirror/kafka-mirror-operator/mirror/config"
)

// assertCommittedDelivered checks the no-data-loss invariant directly: every record
// below a partition's committed offset is on the target (or was filtered).
func (s *scenario) assertCommittedDelivered(p *audit.Produced, m *audit.Mirrored, filtered func(audit.ProducedRecord) bool) int {
	s.t.Helper()
	committed := s.src.committed(s.t, s.group)
	onTarget := make(map[string]bool, len(m.Records))
	for _, r := range m.Records {
		onTarget[r.ID] = true
	}
	missing := 0
	for _, r := range p.Records {
		if r.Offset >= committed[r.Topic][r.Partition] || (filtered != nil && filtered(r)) {
			continue
		}
		if !onTarget[r.ID] {
			missing++
			if missing <= 5 {
				s.t.Errorf("%s at %s/%d offset %d is below the committed offset %d but not on the target",
					r.ID, r.Topic, r.Partition, r.Offset, committed[r.Topic][r.Partition])
			}
		}
	}
	return missing
}

// TestRecordTooLarge (fault 9): one record larger than the target topic accepts. The
// engine stops (the partition or itself) with an error naming the topic, partition and
// offset, and commits nothing past it; everything below the commit point is on the
// target.
func TestRecordTooLarge(t *testing.T) {
	const targetMax = 300 << 10
	s := &scenario{
		t: t, src: newCluster(t, "source", 1), dst: newCluster(t, "target", 1), dir: t.TempDir(),
		topics: stdTopics(), group: "kafka-mirror.e2e.toolarge", start: time.Now(),
	}
	engineBinary(t)
	s.keepLogs()
	s.src.createTopics(t, s.topics, nil)
	s.dst.createTopics(t, s.topics, map[string]string{"max.message.bytes": strconv.Itoa(targetMax)})
	e := s.startEngine("engine", s.config(nil))
	s.waitMembers(2, time.Minute)

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	before, err := audit.Produce(ctx, s.src.addrs(), audit.Workload{Topics: s.topics, Records: 20_000, Rate: 5000, Seed: 1, Run: "before"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	big := s.produceBig(ctx, "e2e.orders", 3, 600<<10)
	after, err := audit.Produce(ctx, s.src.addrs(), audit.Workload{Topics: s.topics, Records: 20_000, Rate: 5000, Seed: 2, Run: "after"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	before.Merge(after)

	offset := strconv.FormatInt(big, 10)
	var line string
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		// An error line naming the record as "offset N": a bare "N" also matches log
		// timestamps (an info line about e2e.orders stamped ...833 once hid the error).
		var ok bool
		if line, ok = e.ErrorContains("e2e.orders", "offset "+offset); ok {
			break
		}
		line = ""
		time.Sleep(500 * time.Millisecond)
	}
	if line == "" {
		t.Errorf("no error naming e2e.orders and offset %d within a minute; tail:\n%s", big, e.LogTail(10))
	}
	exited, code := !e.Running(), 0
	if exited {
		code = e.ExitCode()
		if code == 0 {
			t.Errorf("the engine exited with code 0 after a record it could not write")
		}
	}
	time.Sleep(2 * commitInterval)
	committed := s.src.committed(t, s.group)["e2e.orders"][3]
	if committed > big {
		t.Errorf("e2e.orders/3 committed %d, past the record at %d the target refused", committed, big)
	}
	m, err := audit.ReadAll(ctx, s.dst.addrs(), before.Topics(), audit.ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	missing := s.assertCommittedDelivered(before, m, nil)
	if e.Running() {
		e.Settle(settleGrace)
	}
	rep := audit.Audit(before, m, audit.Options{})
	t.Logf("engine reported: %s", line)
	// Records after the refused one are held back by the stop, not lost: "lost" here is
	// what is missing below the commit point.
	s.figures(rep, map[string]any{"big_offset": big, "committed_at": committed, "engine_exited": exited, "exit_code": code,
		"lost": missing, "held_back": rep.Total.Lost})
}

// produceBig writes one record of size bytes to topic/partition and returns its offset.
func (s *scenario) produceBig(ctx context.Context, topic string, partition int32, size int) int64 {
	s.t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(s.src.addrs()...), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerBatchMaxBytes(int32(size+(64<<10))))
	if err != nil {
		s.t.Fatal(err)
	}
	defer cl.Close()
	r := &kgo.Record{Topic: topic, Partition: partition, Key: []byte("big"), Value: make([]byte, size),
		Headers: []kgo.RecordHeader{{Key: audit.HeaderID, Value: []byte("big")}}}
	if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
		s.t.Fatalf("writing the big record to the source: %v", err)
	}
	return r.Offset
}

// TestSourceRecordsDeleted (fault 10): while the engine is down, the source deletes
// records past the group's committed offset (DeleteRecords). The restarted engine must
// report the gap as data loss on the source, naming the partition, not reset silently.
func TestSourceRecordsDeleted(t *testing.T) {
	s := newScenario(t, stdTopics())
	cfg := s.config(nil)
	e := s.startEngine("engine-0", cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	first, err := audit.Produce(ctx, s.src.addrs(), audit.Workload{Topics: s.topics, Records: 50_000, Seed: 1, Run: "first"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	s.waitComplete(first, audit.Options{})
	e.StopCleanly(time.Minute)

	if _, err := audit.Produce(ctx, s.src.addrs(), audit.Workload{Topics: s.topics, Records: 50_000, Seed: 2, Run: "second"}, nil); err != nil {
		t.Fatal(err)
	}
	committed := s.src.committed(t, s.group)["e2e.orders"][0]
	deleteTo := committed + 100
	s.src.deleteRecords(t, "e2e.orders", 0, deleteTo)
	targetBefore := s.dst.endOffsets(t, s.topics)["e2e.orders"][0]

	e = s.startEngine("engine-1", cfg)
	var line string
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) && line == "" {
		for _, word := range []string{"out of range", "gap", "loss", "deleted", "lost"} {
			if l, ok := e.LogContains("e2e.orders", word); ok {
				line = l
				break
			}
		}
		if line == "" {
			time.Sleep(500 * time.Millisecond)
		}
	}
	if line == "" {
		t.Errorf("the engine did not report the deleted records of e2e.orders/0 (%d..%d) within a minute; tail:\n%s", committed, deleteTo, e.LogTail(15))
	}
	targetAfter := s.dst.endOffsets(t, s.topics)["e2e.orders"][0]
	exited, code := e.Settle(settleGrace)
	t.Logf("engine reported: %s", line)
	s.figures(audit.Report{}, map[string]any{"committed": committed, "deleted_to": deleteTo, "reported": line != "",
		"target_before": targetBefore, "target_after": targetAfter, "engine_exited": exited, "exit_code": code})
}

// TestBadCredentials (fault 12): a wrong SASL password for the source, and a target whose
// TLS certificate the engine does not trust. The engine names the cluster and the cause,
// and either retries (still running, repeating the error) or exits non-zero with it:
// never a silent crash loop.
func TestBadCredentials(t *testing.T) {
	_, serverCert := testCertificates(t)
	otherCA, _ := testCertificates(t)
	tests := map[string]struct {
		srcOpts, dstOpts []kfake.Opt
		mutate           func(c *config.Config, dir string)
		cluster          string
		causes           []string
	}{
		"source wrong SASL password": {
			srcOpts: []kfake.Opt{kfake.EnableSASL(), kfake.Superuser("SCRAM-SHA-256", "mirror", "right")},
			mutate: func(c *config.Config, dir string) {
				pw := filepath.Join(dir, "password")
				os.WriteFile(pw, []byte("wrong\n"), 0o600)
				c.Source.SASL = &config.SASL{Mechanism: config.SASLSCRAMSHA256, Username: "mirror", PasswordFile: pw}
			},
			cluster: "source",
			causes:  []string{"sasl", "auth", "credential", "password"},
		},
		"target TLS certificate from an unknown CA": {
			dstOpts: []kfake.Opt{kfake.TLS(&tls.Config{Certificates: []tls.Certificate{serverCert}})},
			mutate: func(c *config.Config, dir string) {
				caFile := filepath.Join(dir, "ca.crt")
				os.WriteFile(caFile, otherCA, 0o600)
				c.Target.TLS = &config.TLS{CAFile: caFile}
			},
			cluster: "target",
			causes:  []string{"certificate", "x509", "tls"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			s := &scenario{
				t: t, src: newCluster(t, "source", 1, tc.srcOpts...), dst: newCluster(t, "target", 1, tc.dstOpts...),
				dir: t.TempDir(), topics: stdTopics(), group: "kafka-mirror.e2e.badconn", start: time.Now(),
			}
			engineBinary(t)
			s.keepLogs()
			cfg := s.config(nil)
			tc.mutate(&cfg, s.dir)
			e := s.startEngine("engine", cfg)
			var line string
			deadline := time.Now().Add(30 * time.Second)
			for time.Now().Before(deadline) && line == "" {
				for _, cause := range tc.causes {
					if l, ok := e.ErrorContains(tc.cluster, cause); ok {
						line = l
						break
					}
				}
				if line == "" {
					if !e.Running() {
						break
					}
					time.Sleep(500 * time.Millisecond)
				}
			}
			if line == "" {
				t.Errorf("no log line naming the %s cluster and the cause (%v) within 30s; tail:\n%s", tc.cluster, tc.causes, e.LogTail(15))
			}
			// Give it time to show whether it retries or exits.
			time.Sleep(5 * time.Second)
			exited, code := !e.Running(), 0
			if exited {
				if code = e.ExitCode(); code == 0 {
					t.Errorf("the engine exited with code 0 on bad %s credentials", tc.cluster)
				}
			} else {
				e.Kill()
			}
			t.Logf("engine reported: %s", line)
			s.figures(audit.Report{}, map[string]any{"reported": line != "", "engine_exited": exited, "exit_code": code})
		})
	}
}

// testCertificates returns a fresh CA (PEM) and a server certificate for 127.0.0.1
// signed by it.
func testCertificates(t *testing.T) ([]byte, tls.Certificate) {
	t.Helper()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "e2e test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, KeyUsage: x509.KeyUsageCertSign, BasicConstraintsValid: true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	caCert, _ := x509.ParseCertificate(caDER)
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "127.0.0.1"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		KeyUsage: x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}),
		tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}
