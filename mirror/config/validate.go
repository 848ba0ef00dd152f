package config

import (
	"fmt"
	"math"
	"net"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Limits enforced by Validate.
const (
	MaxStreams = 64
	// MaxTopicNameLength is Kafka's limit on topic names.
	MaxTopicNameLength = 249
	// MinMaxMessageBytes and MaxMaxMessageBytes bound producer.maxMessageBytes: below
	// 1 KiB a record batch holds hardly a record; above 100 MiB minus a margin sarama
	// cannot send the request (sarama.MaxRequestSize).
	MinMaxMessageBytes = 1 << 10
	MaxMaxMessageBytes = 100<<20 - 64<<10
	// MaxReplicationFactor bounds topics.replicationFactor: Kafka's CreateTopics takes
	// it as a 16-bit integer.
	MaxReplicationFactor = math.MaxInt16
	// MaxProvenanceHops bounds provenance.maxHops: the header holds one cluster id per
	// hop, and no real topology has more mirrors in a row.
	MaxProvenanceHops = 100
)

// clusterNameChars are the characters of a provenance cluster name: those of Kafka's
// cluster ids (URL-safe base64) and '.', and never the header's separator ','.
var clusterNameChars = regexp.MustCompile(`^[a-zA-Z0-9._-]+$`)

var topicNameChars = regexp.MustCompile(`^[a-zA-Z0-9._-]+$`)

// Validate checks a defaulted config and returns every problem at once as a
// field.ErrorList aggregate, each with its field path (for example
// `topics.include[1]: Invalid value: "orders(": error parsing regexp: ...`).
// It checks the file's own rules; handler expressions are compiled by the handler
// package (mirror.ValidateConfig runs both).
func (c *Config) Validate() error {
	return c.ValidateFields(nil).ToAggregate()
}

// ValidateFields is Validate with every path rooted at root (nil for the file itself),
// so the operator can report spec paths.
func (c *Config) ValidateFields(root *field.Path) field.ErrorList {
	var errs field.ErrorList
	if c.APIVersion != APIVersion {
		errs = append(errs, field.NotSupported(root.Child("apiVersion"), c.APIVersion, []string{APIVersion}))
	}
	if c.Kind != Kind {
		errs = append(errs, field.NotSupported(root.Child("kind"), c.Kind, []string{Kind}))
	}
	errs = append(errs, c.Source.validate(root.Child("source"))...)
	errs = append(errs, c.Target.validate(root.Child("target"))...)
	if strings.TrimSpace(c.ConsumerGroup) == "" {
		errs = append(errs, field.Required(root.Child("consumerGroup"), "the source consumer group that stores the mirror's progress"))
	}
	switch c.InitialOffset {
	case InitialOffsetOldest, InitialOffsetLatest:
	default:
		errs = append(errs, field.NotSupported(root.Child("initialOffset"), c.InitialOffset,
			[]InitialOffset{InitialOffsetOldest, InitialOffsetLatest}))
	}
	errs = append(errs, c.InitialPositions.validate(root.Child("initialPositions"))...)
	if c.InitialPositions != nil && c.InitialPositions.FromFailover != "" && (c.Provenance == nil || !c.Provenance.Enabled) {
		errs = append(errs, field.Invalid(root.Child("initialPositions", "fromFailover"), c.InitialPositions.FromFailover,
			"a failback needs provenance.enabled: true, so that records that came from this mirror's target (left-behind records mirrored forward later, or a mirror restarted by mistake) are never copied back"))
	}
	errs = append(errs, c.Topics.validate(root.Child("topics"))...)
	switch c.Partitioning {
	case PartitioningPreserve, PartitioningHash, PartitioningRoundRobin:
	default:
		errs = append(errs, field.NotSupported(root.Child("partitioning"), c.Partitioning,
			[]Partitioning{PartitioningPreserve, PartitioningHash, PartitioningRoundRobin}))
	}
	if c.Streams < 1 || c.Streams > MaxStreams {
		errs = append(errs, field.Invalid(root.Child("streams"), c.Streams, fmt.Sprintf("must be between 1 and %d", MaxStreams)))
	}
	for _, d := range []struct {
		name string
		v    Duration
	}{
		{"offsetCommitInterval", c.OffsetCommitInterval},
		{"deliveryTimeout", c.DeliveryTimeout},
		{"topicSyncInterval", c.TopicSyncInterval},
	} {
		if d.v.Duration <= 0 {
			errs = append(errs, field.Invalid(root.Child(d.name), d.v.String(), "must be a positive duration"))
		}
	}
	if c.MaxInFlightPerPartition < 1 {
		errs = append(errs, field.Invalid(root.Child("maxInFlightPerPartition"), c.MaxInFlightPerPartition, "must be at least 1"))
	}
	if c.MaxInFlightBytes < 0 {
		errs = append(errs, field.Invalid(root.Child("maxInFlightBytes"), c.MaxInFlightBytes, "must be positive (unset: derived from the container's memory limit)"))
	}
	if m := c.ProducerMaxMessageBytes(); m < 0 || (m > 0 && m < MinMaxMessageBytes) || m > MaxMaxMessageBytes {
		errs = append(errs, field.Invalid(root.Child("producer", "maxMessageBytes"), m,
			fmt.Sprintf("must be between %d and %d bytes (unset: the target topics' max.message.bytes)", MinMaxMessageBytes, MaxMaxMessageBytes)))
	}
	errs = append(errs, c.validateClientTuning(root)...)
	for i, h := range c.Handlers {
		errs = append(errs, h.validate(root.Child("handlers").Index(i))...)
	}
	errs = append(errs, c.validateDelivery(root)...)
	if l := c.RebalanceListener; l != nil && strings.TrimSpace(l.Name) == "" {
		errs = append(errs, field.Required(root.Child("rebalanceListener", "name"), "the name of a registered rebalance listener"))
	}
	if a := c.Metrics.Address; a != "0" {
		if _, _, err := net.SplitHostPort(a); err != nil {
			errs = append(errs, field.Invalid(root.Child("metrics", "address"), a, "must be host:port or :port (\"0\" turns the endpoint off)"))
		}
	}
	errs = append(errs, c.validateGroups(root)...)
	if p := c.Provenance; p != nil && p.Enabled {
		errs = append(errs, p.validate(root.Child("provenance"))...)
	}
	if c.Source.sameAs(c.Target) && c.Topics.Rename.isIdentity() {
		errs = append(errs, field.Invalid(root.Child("target", "bootstrapServers"), c.Target.BootstrapServers,
			"source and target are the same cluster and topics.rename is not set: the mirror would write into the topics it reads"))
	}
	return errs
}

func (p *Provenance) validate(fp *field.Path) field.ErrorList {
	var errs field.ErrorList
	if p.Header == "" {
		errs = append(errs, field.Required(fp.Child("header"), "the name of the provenance header"))
	}
	if p.MaxHops < 1 || p.MaxHops > MaxProvenanceHops {
		errs = append(errs, field.Invalid(fp.Child("maxHops"), p.MaxHops, fmt.Sprintf("must be between 1 and %d", MaxProvenanceHops)))
	}
	for _, n := range []struct{ name, v string }{{"sourceName", p.SourceName}, {"targetName", p.TargetName}} {
		if n.v != "" && !clusterNameChars.MatchString(n.v) {
			errs = append(errs, field.Invalid(fp.Child(n.name), n.v, "may contain only letters, digits, '.', '_' and '-' (',' separates the ids in the header)"))
		}
	}
	if p.SourceName != "" && p.SourceName == p.TargetName {
		errs = append(errs, field.Invalid(fp.Child("targetName"), p.TargetName, "must differ from sourceName: the names tell the clusters apart"))
	}
	return errs
}

func (cl *Cluster) validate(p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if len(cl.BootstrapServers) == 0 {
		errs = append(errs, field.Required(p.Child("bootstrapServers"), "at least one host:port"))
	}
	for i, s := range cl.BootstrapServers {
		host, port, err := net.SplitHostPort(s)
		if err != nil || host == "" || port == "" {
			errs = append(errs, field.Invalid(p.Child("bootstrapServers").Index(i), s, "must be host:port"))
		}
	}
	if t := cl.TLS; t != nil && (t.CertFile == "") != (t.KeyFile == "") {
		errs = append(errs, field.Invalid(p.Child("tls"), "certFile/keyFile", "certFile and keyFile must be set together"))
	}
	if s := cl.SASL; s != nil {
		errs = append(errs, validateSASL(s, p.Child("sasl"))...)
	}
	return errs
}

// SameClusterAs reports whether cl and o name the same cluster: they share a bootstrap
// server (compared without case).
func (cl Cluster) SameClusterAs(o Cluster) bool { return cl.sameAs(o) }

func (cl Cluster) sameAs(o Cluster) bool {
	if len(cl.BootstrapServers) == 0 || len(o.BootstrapServers) == 0 {
		return false
	}
	seen := map[string]bool{}
	for _, s := range cl.BootstrapServers {
		seen[strings.ToLower(s)] = true
	}
	for _, s := range o.BootstrapServers {
		if seen[strings.ToLower(s)] {
			return true
		}
	}
	return false
}

func (t *Topics) validate(p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if len(t.Include) == 0 {
		errs = append(errs, field.Required(p.Child("include"), "at least one regular expression selecting source topics"))
	}
	for _, list := range []struct {
		name     string
		patterns []string
	}{{"include", t.Include}, {"exclude", t.Exclude}, {"configExclude", t.ConfigExclude}} {
		for i, re := range list.patterns {
			if _, err := regexp.Compile(re); err != nil {
				errs = append(errs, field.Invalid(p.Child(list.name).Index(i), re, err.Error()))
			}
		}
	}
	if rf := t.ReplicationFactor; rf != -1 && (rf < 0 || rf > MaxReplicationFactor) {
		errs = append(errs, field.Invalid(p.Child("replicationFactor"), rf,
			fmt.Sprintf("must be between 1 and %d, or -1 (unset: the source topic's, capped at the target's broker count)", MaxReplicationFactor)))
	}
	if r := t.Rename; r != nil {
		rp := p.Child("rename")
		var set []string
		for _, f := range []struct{ name, v string }{{"prefix", r.Prefix}, {"template", r.Template}, {"stripPrefix", r.StripPrefix}} {
			if f.v != "" {
				set = append(set, f.name)
			}
		}
		switch {
		case len(set) > 1:
			errs = append(errs, field.Invalid(rp, strings.Join(set, "+"), "set one of prefix, template and stripPrefix"))
		case r.Template != "" && !strings.Contains(r.Template, "{topic}"):
			errs = append(errs, field.Invalid(rp.Child("template"), r.Template, "must contain {topic}, or every source topic would map to one target"))
		}
		probe, at := r.Prefix, rp.Child("prefix")
		switch {
		case r.Template != "":
			probe, at = strings.ReplaceAll(r.Template, "{topic}", "t"), rp.Child("template")
		case r.StripPrefix != "" && r.Prefix == "":
			probe, at = r.StripPrefix, rp.Child("stripPrefix")
		}
		if probe != "" && !topicNameChars.MatchString(probe) {
			errs = append(errs, field.Invalid(at, probe, "may contain only letters, digits, '.', '_' and '-' (Kafka topic name characters)"))
		}
		if sp := r.StripPrefix; sp != "" {
			// A plain name without the prefix is never selected (TargetTopic): surely a mistake.
			for i, re := range t.Include {
				if topicNameChars.MatchString(re) && !strings.HasPrefix(re, sp) {
					errs = append(errs, field.Invalid(p.Child("include").Index(i), re,
						fmt.Sprintf("does not start with topics.rename.stripPrefix %q: a topic without the prefix is never mirrored", sp)))
				}
			}
		}
	}
	return errs
}

func (r *Rename) isIdentity() bool {
	return r == nil || (r.Prefix == "" && r.StripPrefix == "" && (r.Template == "" || r.Template == "{topic}"))
}

// Selects tells whether a source topic has a target name under this rename: with
// StripPrefix, only a topic that starts with it and is longer.
func (r *Rename) Selects(source string) bool {
	return r == nil || r.StripPrefix == "" || (len(source) > len(r.StripPrefix) && strings.HasPrefix(source, r.StripPrefix))
}

// TargetTopic returns the target topic name for a source topic under this rename
// (a topic Selects refuses keeps its name: it is never mirrored).
func (r *Rename) TargetTopic(source string) string {
	switch {
	case r == nil:
		return source
	case r.Template != "":
		return strings.ReplaceAll(r.Template, "{topic}", source)
	case r.StripPrefix != "":
		return strings.TrimPrefix(source, r.StripPrefix)
	default:
		return r.Prefix + source
	}
}

func (h *HandlerSpec) validate(p *field.Path) field.ErrorList {
	var errs field.ErrorList
	switch {
	case h.CEL == nil && h.Name == "":
		errs = append(errs, field.Required(p, "set cel or name"))
	case h.CEL != nil && h.Name != "":
		errs = append(errs, field.Invalid(p, h.Name, "set cel or name, not both"))
	case h.CEL != nil:
		c := h.CEL
		if c.Filter == "" && (c.Transform == nil || *c.Transform == CELTransform{}) {
			errs = append(errs, field.Required(p.Child("cel"), "set filter and/or transform"))
		}
		if c.OnError != OnErrorFail && c.OnError != OnErrorSkip {
			errs = append(errs, field.NotSupported(p.Child("cel", "onError"), c.OnError, []string{OnErrorFail, OnErrorSkip}))
		}
		if len(h.Args) > 0 {
			errs = append(errs, field.Forbidden(p.Child("args"), "args are for named handlers"))
		}
	}
	return errs
}

func validateSASL(s *SASL, sp *field.Path) field.ErrorList {
	var errs field.ErrorList
	switch s.Mechanism {
	case SASLPlain, SASLSCRAMSHA256, SASLSCRAMSHA512:
		if s.Username == "" {
			errs = append(errs, field.Required(sp.Child("username"), ""))
		}
		if s.PasswordFile == "" {
			errs = append(errs, field.Required(sp.Child("passwordFile"), "the file holding the password (credentials never go in this file)"))
		}
	case SASLOAuthBearer:
		o := s.OAuth
		if o == nil {
			return append(errs, field.Required(sp.Child("oauth"), "tokenUrl, clientId and clientSecretFile of the OAuth client"))
		}
		op := sp.Child("oauth")
		if u, err := url.Parse(o.TokenURL); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
			errs = append(errs, field.Invalid(op.Child("tokenUrl"), o.TokenURL, "must be an http(s) URL"))
		}
		if o.ClientID == "" {
			errs = append(errs, field.Required(op.Child("clientId"), ""))
		}
		if o.ClientSecretFile == "" {
			errs = append(errs, field.Required(op.Child("clientSecretFile"), "the file holding the client secret (credentials never go in this file)"))
		}
	case SASLAWSMSKIAM:
		if s.AWS == nil || s.AWS.Region == "" {
			errs = append(errs, field.Required(sp.Child("aws", "region"), "the MSK cluster's AWS region"))
		}
	default:
		errs = append(errs, field.NotSupported(sp.Child("mechanism"), s.Mechanism, SASLMechanisms))
	}
	return errs
}

func (c *Config) validateClientTuning(root *field.Path) field.ErrorList {
	var errs field.ErrorList
	if p := c.Producer; p != nil {
		pp := root.Child("producer")
		if p.Compression != "" && !slices.Contains(Compressions, p.Compression) {
			errs = append(errs, field.NotSupported(pp.Child("compression"), p.Compression, Compressions))
		}
		if p.FlushFrequency.Duration < 0 {
			errs = append(errs, field.Invalid(pp.Child("flushFrequency"), p.FlushFrequency.String(), "must not be negative"))
		}
		if p.FlushBytes < 0 || p.FlushBytes > MaxMaxMessageBytes {
			errs = append(errs, field.Invalid(pp.Child("flushBytes"), p.FlushBytes, fmt.Sprintf("must be between 0 and %d", MaxMaxMessageBytes)))
		}
		if p.FlushMessages < 0 {
			errs = append(errs, field.Invalid(pp.Child("flushMessages"), p.FlushMessages, "must not be negative"))
		}
		if p.Producers < 0 || p.Producers > MaxProducers {
			errs = append(errs, field.Invalid(pp.Child("producers"), p.Producers, fmt.Sprintf("must be between 1 and %d (0: the default, %d)", MaxProducers, DefaultProducers)))
		}
		if p.MaxInFlightRequests < 0 || p.MaxInFlightRequests > MaxMaxInFlightRequests {
			errs = append(errs, field.Invalid(pp.Child("maxInFlightRequests"), p.MaxInFlightRequests,
				fmt.Sprintf("must be between 1 and %d (0: the default, %d); Kafka keeps the idempotence state of the last %d batches per partition", MaxMaxInFlightRequests, DefaultMaxInFlightRequests, MaxMaxInFlightRequests)))
		}
	}
	if k := c.Consumer; k != nil {
		cp := root.Child("consumer")
		if k.FetchMinBytes < 0 {
			errs = append(errs, field.Invalid(cp.Child("fetchMinBytes"), k.FetchMinBytes, "must not be negative"))
		}
		if k.FetchPartitionBytes < 0 {
			errs = append(errs, field.Invalid(cp.Child("fetchPartitionBytes"), k.FetchPartitionBytes, "must not be negative"))
		}
		if w := k.FetchMaxWait.Duration; w < 0 || w > maxFetchWait {
			errs = append(errs, field.Invalid(cp.Child("fetchMaxWait"), k.FetchMaxWait.String(), "must be between 0 and "+maxFetchWait.String()+": a longer wait delays the drain before a rebalance"))
		}
		if t := k.SessionTimeout.Duration; t != 0 && (t < minSessionTimeout || t > maxSessionTimeout) {
			errs = append(errs, field.Invalid(cp.Child("sessionTimeout"), k.SessionTimeout.String(),
				"must be between "+minSessionTimeout.String()+" and "+maxSessionTimeout.String()+" (the broker's group.min.session.timeout.ms and group.max.session.timeout.ms defaults)"))
		}
		if id := k.GroupInstanceID; id != "" && strings.TrimSpace(id) != id {
			errs = append(errs, field.Invalid(cp.Child("groupInstanceId"), id, "must not begin or end with spaces"))
		}
	}
	return errs
}

// maxFetchWait bounds consumer.fetchMaxWait: a fetch in flight holds up a drain.
const maxFetchWait = 10 * time.Second

// minSessionTimeout and maxSessionTimeout bound consumer.sessionTimeout: a broker with
// default settings refuses a member whose timeout lies outside them.
const (
	minSessionTimeout = 6 * time.Second
	maxSessionTimeout = 30 * time.Minute
)

// validateDelivery checks delivery and transactionInterval. exactlyOnce keeps one
// transaction per source partition whose records all go to the same-numbered target
// partition, so it refuses what would spread a source partition's records (hash,
// roundRobin) or multiply them in ways the engine cannot see (a named handler may
// fan out).
func (c *Config) validateDelivery(root *field.Path) field.ErrorList {
	var errs field.ErrorList
	switch c.Delivery {
	case DeliveryAtLeastOnce:
		return nil
	case DeliveryExactlyOnce:
	default:
		return append(errs, field.NotSupported(root.Child("delivery"), c.Delivery, []Delivery{DeliveryAtLeastOnce, DeliveryExactlyOnce}))
	}
	if c.Partitioning != PartitioningPreserve {
		errs = append(errs, field.Invalid(root.Child("partitioning"), c.Partitioning,
			"delivery exactlyOnce needs partitioning preserve: its transactions and fencing are per source partition"))
	}
	for i, h := range c.Handlers {
		if h.Name != "" {
			errs = append(errs, field.Invalid(root.Child("handlers").Index(i).Child("name"), h.Name,
				"delivery exactlyOnce allows CEL handlers only: a named handler may fan a record out"))
		}
	}
	if !c.NoDataLossEnabled() {
		errs = append(errs, field.Invalid(root.Child("noDataLoss"), false, "delivery exactlyOnce needs noDataLoss true"))
	}
	switch iv := c.TransactionInterval.Duration; {
	case iv <= 0:
		errs = append(errs, field.Invalid(root.Child("transactionInterval"), c.TransactionInterval.String(), "must be a positive duration"))
	case iv > c.OffsetCommitInterval.Duration:
		errs = append(errs, field.Invalid(root.Child("transactionInterval"), c.TransactionInterval.String(),
			fmt.Sprintf("must be at most offsetCommitInterval (%s)", c.OffsetCommitInterval.String())))
	}
	return errs
}

func (p *InitialPositions) validate(path *field.Path) field.ErrorList {
	if p == nil {
		return nil
	}
	var errs field.ErrorList
	seen := map[string]int{}
	for i, o := range p.Offsets {
		at := path.Child("offsets").Index(i)
		if strings.TrimSpace(o.Topic) == "" {
			errs = append(errs, field.Required(at.Child("topic"), "the source topic"))
		}
		if o.Partition < 0 {
			errs = append(errs, field.Invalid(at.Child("partition"), o.Partition, "must be 0 or more"))
		}
		if o.Offset < 0 {
			errs = append(errs, field.Invalid(at.Child("offset"), o.Offset, "must be 0 or more"))
		}
		key := fmt.Sprintf("%s/%d", o.Topic, o.Partition)
		if j, ok := seen[key]; ok {
			errs = append(errs, field.Duplicate(at, fmt.Sprintf("%s partition %d, also at offsets[%d]", o.Topic, o.Partition, j)))
		} else {
			seen[key] = i
		}
	}
	return errs
}
