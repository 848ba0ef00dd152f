package kafka

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/kafka-mirror/kafka-mirror-operator/internal/testutil"
	"github.com/kafka-mirror/kafka-mirror-operator/mirror/config"
)

func TestSASLAgainstKfake(t *testing.T) {
	c, err := kfake.NewCluster(
		kfake.NumBrokers(1),
		kfake.EnableSASL(),
		kfake.Superuser(config.SASLPlain, "plain-user", "plain-pw"),
		kfake.Superuser(config.SASLSCRAMSHA256, "scram256-user", "scram256-pw"),
		kfake.Superuser(config.SASLSCRAMSHA512, "scram512-user", "scram512-pw"),
		kfake.SeedTopics(3, "orders"),
	)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()

	tests := map[string]struct {
		mechanism, user, password string
		wantErr                   string
	}{
		"plain":                        {config.SASLPlain, "plain-user", "plain-pw\n", ""},
		"scram-sha-256":                {config.SASLSCRAMSHA256, "scram256-user", "scram256-pw", ""},
		"scram-sha-512":                {config.SASLSCRAMSHA512, "scram512-user", "scram512-pw\n", ""},
		"scram-sha-512 wrong password": {config.SASLSCRAMSHA512, "scram512-user", "nope", "check source.sasl.username and source.sasl.passwordFile"},
		"plain wrong password":         {config.SASLPlain, "plain-user", "nope", "check source.sasl.username and source.sasl.passwordFile"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			cl := config.Cluster{
				BootstrapServers: c.ListenAddrs(),
				ClientID:         "kafka-mirror-test",
				SASL: &config.SASL{
					Mechanism:    tc.mechanism,
					Username:     tc.user,
					PasswordFile: testutil.WriteFile(t, t.TempDir(), "password", tc.password),
				},
			}
			admin, err := NewClusterAdmin(cl, WithRole(RoleSource))
			if tc.wantErr != "" {
				if err == nil {
					admin.Close()
					t.Fatalf("connected with a wrong password")
				}
				if !strings.Contains(err.Error(), tc.wantErr) || !strings.Contains(err.Error(), c.ListenAddrs()[0]) {
					t.Fatalf("error %q does not name the cluster and its address", err)
				}
				// The cause must say what the broker rejected, not only "out of brokers".
				if !strings.Contains(strings.ToLower(err.Error()), "sasl") && !strings.Contains(strings.ToLower(err.Error()), "authentica") {
					t.Fatalf("error %q does not say authentication failed", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("NewClusterAdmin: %v", err)
			}
			defer admin.Close()
			topics, err := admin.ListTopics()
			if err != nil {
				t.Fatalf("ListTopics: %v", err)
			}
			if got := topics["orders"].NumPartitions; got != 3 {
				t.Fatalf("orders has %d partitions through SASL, want 3", got)
			}
		})
	}
}

func TestConfigErrorsNameTheField(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "missing")
	notPEM := testutil.WriteFile(t, t.TempDir(), "ca.crt", "not a certificate")
	tests := map[string]struct {
		cl   config.Cluster
		opts []Option
		want string
	}{
		"missing password file": {
			cl:   config.Cluster{SASL: &config.SASL{Mechanism: config.SASLPlain, Username: "u", PasswordFile: missing}},
			opts: []Option{WithRole(RoleSource)},
			want: "source.sasl.passwordFile: open " + missing,
		},
		"unknown mechanism": {
			cl:   config.Cluster{SASL: &config.SASL{Mechanism: "GSSAPI", Username: "u", PasswordFile: notPEM}},
			opts: []Option{WithRole(RoleTarget)},
			want: `target.sasl.mechanism: "GSSAPI" is not one of`,
		},
		"missing ca file": {
			cl:   config.Cluster{TLS: &config.TLS{CAFile: missing}},
			opts: []Option{WithRole(RoleTarget)},
			want: "target.tls.caFile: open " + missing,
		},
		"ca file without a certificate": {
			cl:   config.Cluster{TLS: &config.TLS{CAFile: notPEM}},
			opts: []Option{WithRole(RoleSource)},
			want: "source.tls.caFile: " + notPEM + " holds no PEM certificate",
		},
		"second ca bundle without a certificate": {
			cl:   config.Cluster{TLS: &config.TLS{CAFiles: []string{missing, notPEM}}},
			opts: []Option{WithRole(RoleTarget)},
			want: "target.tls.caFiles[0]: open " + missing,
		},
		"cert without key": {
			cl:   config.Cluster{TLS: &config.TLS{CertFile: notPEM}},
			opts: []Option{WithRole(RoleSource)},
			want: "source.tls: certFile and keyFile must be set together",
		},
		"unreadable key pair": {
			cl:   config.Cluster{TLS: &config.TLS{CertFile: notPEM, KeyFile: notPEM}},
			opts: []Option{WithRole(RoleSource)},
			want: "source.tls.certFile: while loading the client key pair",
		},
		"file reader error": {
			cl: config.Cluster{SASL: &config.SASL{Mechanism: config.SASLPlain, Username: "u", PasswordFile: "secret/password"}},
			opts: []Option{WithRole(RoleSource), WithFileReader(func(string) ([]byte, error) {
				return nil, errors.New("secret key password not found")
			})},
			want: "source.sasl.passwordFile: secret key password not found",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			_, err := NewConfig(tc.cl, tc.opts...)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error = %v, want it to contain %q", err, tc.want)
			}
		})
	}
}

func TestNewConfigFromFileReader(t *testing.T) {
	files := map[string][]byte{"pw": []byte("from-memory\n")}
	sc, err := NewConfig(config.Cluster{
		ClientID: "mirror-1",
		SASL:     &config.SASL{Mechanism: config.SASLSCRAMSHA256, Username: "u", PasswordFile: "pw"},
	}, WithFileReader(func(p string) ([]byte, error) { return files[p], nil }))
	if err != nil {
		t.Fatal(err)
	}
	if sc.Net.SASL.Password != "from-memory" || sc.Net.SASL.User != "u" || sc.Net.SASL.Mechanism != sarama.SASLTypeSCRAMSHA256 {
		t.Fatalf("SASL = %q/%q/%q", sc.Net.SASL.User, sc.Net.SASL.Password, sc.Net.SASL.Mechanism)
	}
	if sc.ClientID != "mirror-1" || sc.Version != sarama.V3_6_0_0 || sc.Metadata.AllowAutoTopicCreation {
		t.Fatalf("clientID=%q version=%v autoCreate=%v", sc.ClientID, sc.Version, sc.Metadata.AllowAutoTopicCreation)
	}
}

// selfSigned returns PEM certificate and key for 127.0.0.1.
func selfSigned(t *testing.T) (certPEM, keyPEM []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "kfake"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		IPAddresses:           []net.IP{net.ParseIP("127.0.0.1")},
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kb, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb})
}

func TestTLSAgainstKfake(t *testing.T) {
	certPEM, keyPEM := selfSigned(t)
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(2, "t"),
		kfake.TLS(&tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	caFile := testutil.WriteFile(t, t.TempDir(), "ca.crt", string(certPEM))
	certFile := testutil.WriteFile(t, t.TempDir(), "tls.crt", string(certPEM))
	keyFile := testutil.WriteFile(t, t.TempDir(), "tls.key", string(keyPEM))
	otherPEM, _ := selfSigned(t)
	otherFile := testutil.WriteFile(t, t.TempDir(), "old-ca.crt", string(otherPEM))

	tests := map[string]struct {
		tls    *config.TLS
		wantOK bool
	}{
		"trusted ca":           {&config.TLS{CAFile: caFile}, true},
		"client certificate":   {&config.TLS{CAFile: caFile, CertFile: certFile, KeyFile: keyFile}, true},
		"insecure skip verify": {&config.TLS{InsecureSkipVerify: true}, true},
		// A CA rotation: the old CA first, the one that signed the broker in caFiles.
		"trusted among several cas": {&config.TLS{CAFile: otherFile, CAFiles: []string{caFile}}, true},
		"only an unrelated ca":      {&config.TLS{CAFile: otherFile}, false},
		"system roots do not trust": {&config.TLS{}, false},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			cl := config.Cluster{BootstrapServers: c.ListenAddrs(), TLS: tc.tls}
			admin, err := NewClusterAdmin(cl, WithRole(RoleTarget))
			if !tc.wantOK {
				if err == nil {
					admin.Close()
					t.Fatal("connected to a server whose certificate is not trusted")
				}
				if !strings.Contains(err.Error(), "while connecting to the target cluster") {
					t.Fatalf("error %q does not name the target cluster", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("NewClusterAdmin: %v", err)
			}
			defer admin.Close()
			topics, err := admin.ListTopics()
			if err != nil {
				t.Fatal(err)
			}
			if topics["t"].NumPartitions != 2 {
				t.Fatalf("topic t has %d partitions, want 2", topics["t"].NumPartitions)
			}
		})
	}
}

func TestProducerAndConsumerPolicy(t *testing.T) {
	base := func(noDataLoss bool, p config.Partitioning) *config.Config {
		c := &config.Config{
			Source:        config.Cluster{BootstrapServers: []string{"s:9092"}},
			Target:        config.Cluster{BootstrapServers: []string{"t:9092"}},
			ConsumerGroup: "g",
			Partitioning:  p,
			NoDataLoss:    config.BoolPtr(noDataLoss),
		}
		c.Default()
		return c
	}
	tests := map[string]struct {
		cfg           *config.Config
		acks          sarama.RequiredAcks
		idempotent    bool
		openRequests  int
		isolation     sarama.IsolationLevel
		minRetryTotal time.Duration
	}{
		"no data loss": {base(true, config.PartitioningPreserve), sarama.WaitForAll, true, 1, sarama.ReadCommitted, 2 * time.Minute},
		"fast":         {base(false, config.PartitioningHash), sarama.WaitForLocal, false, 5, sarama.ReadUncommitted, 0},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			pc, err := ProducerConfig(tc.cfg)
			if err != nil {
				t.Fatal(err)
			}
			if pc.Producer.RequiredAcks != tc.acks || pc.Producer.Idempotent != tc.idempotent || pc.Net.MaxOpenRequests != tc.openRequests {
				t.Fatalf("acks=%v idempotent=%v openRequests=%d", pc.Producer.RequiredAcks, pc.Producer.Idempotent, pc.Net.MaxOpenRequests)
			}
			if !pc.Producer.Return.Successes || !pc.Producer.Return.Errors || pc.Metadata.AllowAutoTopicCreation {
				t.Fatalf("successes=%v errors=%v autoCreate=%v", pc.Producer.Return.Successes, pc.Producer.Return.Errors, pc.Metadata.AllowAutoTopicCreation)
			}
			var total time.Duration
			for i := 0; i < pc.Producer.Retry.Max; i++ {
				total += pc.Producer.Retry.BackoffFunc(i, pc.Producer.Retry.Max)
			}
			if total < tc.minRetryTotal {
				t.Fatalf("retries back off for %v in total, want at least %v", total, tc.minRetryTotal)
			}
			// A leader lookup (metadata refresh) must not give up before deliveryTimeout
			// either: sarama fails a record at once when it finds no leader.
			var metaTotal time.Duration
			for i := 0; tc.minRetryTotal > 0 && i < pc.Metadata.Retry.Max; i++ {
				metaTotal += pc.Metadata.Retry.BackoffFunc(i, pc.Metadata.Retry.Max)
			}
			if tc.minRetryTotal > 0 && (pc.Metadata.Timeout < tc.minRetryTotal || metaTotal < tc.minRetryTotal) {
				t.Fatalf("metadata refresh gives up after %v (timeout) / %v (summed backoff), want at least %v", pc.Metadata.Timeout, metaTotal, tc.minRetryTotal)
			}
			// That long wait is for the mirrored topics only: a full refresh would wait as
			// long for any leaderless topic of the target cluster.
			if tc.minRetryTotal > 0 && pc.Metadata.Full {
				t.Fatal("the producer's client refreshes every topic of the target (Metadata.Full), want only the topics it writes to")
			}
			cc, err := ConsumerConfig(tc.cfg)
			if err != nil {
				t.Fatal(err)
			}
			if cc.Consumer.Offsets.AutoCommit.Enable || cc.Consumer.Offsets.Initial != sarama.OffsetOldest ||
				cc.Consumer.Group.ResetInvalidOffsets || !cc.Consumer.Return.Errors || cc.Consumer.IsolationLevel != tc.isolation {
				t.Fatalf("consumer policy wrong: %+v", cc.Consumer)
			}
			if got := cc.Consumer.Group.Rebalance.GroupStrategies[0].Name(); got != sarama.StickyBalanceStrategyName {
				t.Fatalf("strategy %q, want sticky", got)
			}
			if cc.Metadata.RefreshFrequency != 30*time.Second {
				t.Fatalf("metadata refresh %v, want 30s", cc.Metadata.RefreshFrequency)
			}
		})
	}
}

// TestConsumerInitialOffset checks that initialOffset picks where a partition without
// any committed offset starts.
func TestConsumerInitialOffset(t *testing.T) {
	tests := map[string]struct {
		initial config.InitialOffset
		want    int64
	}{
		"default is oldest": {"", sarama.OffsetOldest},
		"oldest":            {config.InitialOffsetOldest, sarama.OffsetOldest},
		"latest":            {config.InitialOffsetLatest, sarama.OffsetNewest},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			c := &config.Config{
				Source:        config.Cluster{BootstrapServers: []string{"s:9092"}},
				Target:        config.Cluster{BootstrapServers: []string{"t:9092"}},
				ConsumerGroup: "g",
				InitialOffset: tc.initial,
			}
			c.Default()
			cc, err := ConsumerConfig(c)
			if err != nil {
				t.Fatal(err)
			}
			if cc.Consumer.Offsets.Initial != tc.want {
				t.Fatalf("Consumer.Offsets.Initial = %d, want %d", cc.Consumer.Offsets.Initial, tc.want)
			}
		})
	}
}

// TestRack: the rack reaches sarama's RackID (sent in every fetch, so brokers with
// follower fetching pick a replica in the same zone), literally or from the environment.
func TestRack(t *testing.T) {
	t.Setenv("KAFKA_MIRROR_RACK", "eu-west-1b")
	t.Setenv("EMPTY_RACK", "")
	tests := map[string]struct{ rack, want string }{
		"none":                 {"", ""},
		"literal":              {"use1-az1", "use1-az1"},
		"from the environment": {"${KAFKA_MIRROR_RACK}", "eu-west-1b"},
		"empty variable":       {"${EMPTY_RACK}", ""},
		"unset variable":       {"${NOT_SET_ANYWHERE}", ""},
		"not a reference":      {"$KAFKA_MIRROR_RACK", "$KAFKA_MIRROR_RACK"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			sc, err := NewConfig(config.Cluster{BootstrapServers: []string{"localhost:9092"}, Rack: tc.rack})
			if err != nil {
				t.Fatal(err)
			}
			if sc.RackID != tc.want {
				t.Fatalf("RackID = %q, want %q", sc.RackID, tc.want)
			}
		})
	}
}

// TestClientTuning: producer.compression, flush* and consumer.fetch* reach sarama, every
// codec passes sarama's own validation with the engine's protocol version, and the
// default is none.
func TestClientTuning(t *testing.T) {
	base := func(mutate func(*config.Config)) *config.Config {
		c := &config.Config{Source: config.Cluster{BootstrapServers: []string{"s:9092"}},
			Target: config.Cluster{BootstrapServers: []string{"t:9092"}}, ConsumerGroup: "g"}
		if mutate != nil {
			mutate(c)
		}
		c.Default()
		return c
	}
	codecs := map[string]sarama.CompressionCodec{"": sarama.CompressionNone, "none": sarama.CompressionNone,
		"gzip": sarama.CompressionGZIP, "snappy": sarama.CompressionSnappy, "lz4": sarama.CompressionLZ4, "zstd": sarama.CompressionZSTD}
	for name, want := range codecs {
		t.Run("compression "+name, func(t *testing.T) {
			pc, err := ProducerConfig(base(func(c *config.Config) { c.Producer = &config.Producer{Compression: name} }))
			if err != nil {
				t.Fatal(err)
			}
			if pc.Producer.Compression != want {
				t.Fatalf("codec = %v, want %v", pc.Producer.Compression, want)
			}
		})
	}
	t.Run("flush and fetch", func(t *testing.T) {
		c := base(func(c *config.Config) {
			c.Producer = &config.Producer{FlushFrequency: config.Duration{Duration: 5 * time.Millisecond}, FlushBytes: 1 << 20, FlushMessages: 500}
			c.Consumer = &config.Consumer{FetchMinBytes: 64 << 10, FetchPartitionBytes: 4 << 20, FetchMaxWait: config.Duration{Duration: 100 * time.Millisecond}}
		})
		pc, err := ProducerConfig(c)
		if err != nil {
			t.Fatal(err)
		}
		if f := pc.Producer.Flush; f.Frequency != 5*time.Millisecond || f.Bytes != 1<<20 || f.Messages != 500 {
			t.Fatalf("flush = %+v", f)
		}
		cc, err := ConsumerConfig(c)
		if err != nil {
			t.Fatal(err)
		}
		if f := cc.Consumer.Fetch; f.Min != 64<<10 || f.Default != 4<<20 || cc.Consumer.MaxWaitTime != 100*time.Millisecond {
			t.Fatalf("fetch = %+v, wait %v", f, cc.Consumer.MaxWaitTime)
		}
	})
	t.Run("unset keeps sarama's fetch defaults", func(t *testing.T) {
		cc, err := ConsumerConfig(base(nil))
		if err != nil {
			t.Fatal(err)
		}
		def := sarama.NewConfig()
		if cc.Consumer.Fetch != def.Consumer.Fetch || cc.Consumer.MaxWaitTime != def.Consumer.MaxWaitTime {
			t.Fatalf("fetch = %+v/%v, want sarama's %+v/%v", cc.Consumer.Fetch, cc.Consumer.MaxWaitTime, def.Consumer.Fetch, def.Consumer.MaxWaitTime)
		}
	})
}

// TestFetchPartitionBytesFor checks the fetch size by the source's round trip: sarama's
// 1 MiB up to 25 ms (a near source is read as before), 1 MiB more per 25 ms, 8 MiB at
// most.
func TestFetchPartitionBytesFor(t *testing.T) {
	for rtt, want := range map[time.Duration]int32{
		0:                      1 << 20,
		time.Millisecond:       1 << 20,
		24 * time.Millisecond:  1 << 20,
		50 * time.Millisecond:  2 << 20,
		100 * time.Millisecond: 4 << 20,
		time.Second:            8 << 20,
	} {
		if got := FetchPartitionBytesFor(rtt); got != want {
			t.Errorf("FetchPartitionBytesFor(%v) = %d, want %d", rtt, got, want)
		}
	}
}
