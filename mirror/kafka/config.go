package kafka

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/IBM/sarama"

	"github.com/kafka-mirror/kafka-mirror-operator/mirror/config"
)

// Version is the Kafka protocol version the mirror speaks. 3.6 is the oldest version
// whose features the engine relies on (idempotent producer, read_committed, KIP-74 fetch
// limits) and is supported by every broker still maintained.
var Version = sarama.V3_6_0_0

// Role names of the two clusters, used as the root of field paths in errors.
const (
	RoleSource = "source"
	RoleTarget = "target"
)

// Option changes how NewConfig and the client helpers build a configuration.
type Option func(*options)

type options struct {
	role     string
	readFile func(path string) ([]byte, error)
}

func newOptions(opts []Option) options {
	o := options{role: "cluster", readFile: os.ReadFile}
	for _, opt := range opts {
		opt(&o)
	}
	return o
}

// WithFileReader replaces os.ReadFile for the files a Cluster names (CA, certificate,
// key, password). The operator passes a reader over Secret data it already holds.
func WithFileReader(read func(path string) ([]byte, error)) Option {
	return func(o *options) {
		if read != nil {
			o.readFile = read
		}
	}
}

// WithRole names the cluster ("source" or "target") in errors and field paths. Without
// it errors say "cluster".
func WithRole(role string) Option {
	return func(o *options) { o.role = role }
}

// NewConfig builds a sarama configuration that reaches cl: bootstrap-independent
// settings (client id, TLS, SASL, protocol version) with sarama's defaults for the
// rest. Producer and consumer behaviour is added by ProducerConfig and ConsumerConfig.
func NewConfig(cl config.Cluster, opts ...Option) (*sarama.Config, error) {
	o := newOptions(opts)
	sc := sarama.NewConfig()
	sc.Version = Version
	sc.ClientID = cl.ClientID
	if sc.ClientID == "" {
		sc.ClientID = config.DefaultClientID
	}
	// Never let a metadata request create a topic: a mirror that auto-creates target
	// topics creates them with the broker's default partition count, which breaks
	// partition preservation for good.
	sc.Metadata.AllowAutoTopicCreation = false
	// Bound the time a metadata request may take when every broker is unreachable, so
	// the user sees an error in seconds rather than minutes.
	sc.Metadata.Timeout = 30 * time.Second
	sc.RackID = ResolveRack(cl.Rack)
	if cl.TLS != nil {
		tc, err := tlsConfig(cl.TLS, o)
		if err != nil {
			return nil, err
		}
		sc.Net.TLS.Enable = true
		sc.Net.TLS.Config = tc
	}
	if cl.SASL != nil {
		if err := configureSASL(sc, cl.SASL, o); err != nil {
			return nil, err
		}
	}
	if err := sc.Validate(); err != nil {
		return nil, fmt.Errorf("while configuring the %s cluster client: %w", o.role, err)
	}
	return sc, nil
}

// ResolveRack returns the rack a Cluster's rack field names: the value itself, or for
// "${NAME}" the environment variable NAME ("" when unset).
func ResolveRack(rack string) string { return ResolveEnv(rack) }

// ResolveEnv returns the value a config field names: the value itself, or for "${NAME}"
// the environment variable NAME ("" when unset).
func ResolveEnv(v string) string {
	if name, ok := strings.CutPrefix(v, "${"); ok && strings.HasSuffix(name, "}") {
		return os.Getenv(strings.TrimSuffix(name, "}"))
	}
	return v
}

func tlsConfig(t *config.TLS, o options) (*tls.Config, error) {
	tc := &tls.Config{
		MinVersion: tls.VersionTLS12,
		// InsecureSkipVerify is an explicit user choice documented as test-only.
		InsecureSkipVerify: t.InsecureSkipVerify, //nolint:gosec // opt-in, documented
	}
	if t.CAFile != "" || len(t.CAFiles) > 0 {
		pool := x509.NewCertPool()
		files := append([]string{t.CAFile}, t.CAFiles...)
		for i, f := range files {
			if f == "" {
				continue
			}
			field := "caFile"
			if i > 0 {
				field = fmt.Sprintf("caFiles[%d]", i-1)
			}
			pem, err := o.readFile(f)
			if err != nil {
				return nil, fmt.Errorf("%s.tls.%s: %w", o.role, field, err)
			}
			if !pool.AppendCertsFromPEM(pem) {
				return nil, fmt.Errorf("%s.tls.%s: %s holds no PEM certificate", o.role, field, f)
			}
		}
		tc.RootCAs = pool
	}
	if t.CertFile != "" || t.KeyFile != "" {
		if t.CertFile == "" || t.KeyFile == "" {
			return nil, fmt.Errorf("%s.tls: certFile and keyFile must be set together", o.role)
		}
		certPEM, err := o.readFile(t.CertFile)
		if err != nil {
			return nil, fmt.Errorf("%s.tls.certFile: %w", o.role, err)
		}
		keyPEM, err := o.readFile(t.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("%s.tls.keyFile: %w", o.role, err)
		}
		cert, err := tls.X509KeyPair(certPEM, keyPEM)
		if err != nil {
			return nil, fmt.Errorf("%s.tls.certFile: while loading the client key pair: %w", o.role, err)
		}
		tc.Certificates = []tls.Certificate{cert}
	}
	return tc, nil
}

func configureSASL(sc *sarama.Config, s *config.SASL, o options) error {
	if s.Mechanism == config.SASLOAuthBearer || s.Mechanism == config.SASLAWSMSKIAM {
		return configureTokenSASL(sc, s, o)
	}
	pw, err := o.readFile(s.PasswordFile)
	if err != nil {
		return fmt.Errorf("%s.sasl.passwordFile: %w", o.role, err)
	}
	// Secret files written by editors or `echo` usually end in a newline that is not part
	// of the password.
	password := strings.TrimRight(string(pw), "\r\n")
	sc.Net.SASL.Enable = true
	sc.Net.SASL.Handshake = true
	sc.Net.SASL.Version = sarama.SASLHandshakeV1
	sc.Net.SASL.User = s.Username
	sc.Net.SASL.Password = password
	switch s.Mechanism {
	case config.SASLPlain:
		sc.Net.SASL.Mechanism = sarama.SASLTypePlaintext
	case config.SASLSCRAMSHA256:
		sc.Net.SASL.Mechanism = sarama.SASLTypeSCRAMSHA256
		sc.Net.SASL.SCRAMClientGeneratorFunc = func() sarama.SCRAMClient { return newSCRAMClient(sha256Hash) }
	case config.SASLSCRAMSHA512:
		sc.Net.SASL.Mechanism = sarama.SASLTypeSCRAMSHA512
		sc.Net.SASL.SCRAMClientGeneratorFunc = func() sarama.SCRAMClient { return newSCRAMClient(sha512Hash) }
	default:
		return fmt.Errorf("%s.sasl.mechanism: %q is not one of %s", o.role, s.Mechanism, strings.Join(config.SASLMechanisms, ", "))
	}
	return nil
}
