package controllers

import (
	"fmt"

	"github.com/kafka-mirror/kafka-mirror-operator/api/v1alpha1"
	"github.com/kafka-mirror/kafka-mirror-operator/mirror/config"
	"github.com/kafka-mirror/kafka-mirror-operator/mirror/kafka"
)

// RenderConfig renders the engine config (mirror.yaml) of a KafkaMirror, with defaults
// filled. Credentials are not in it: it names the files under /etc/kafka-mirror/secrets
// where the mirror pods mount the referenced Secrets. syncTopics is false because the
// operator syncs the target topics itself. Every spec field with a config counterpart
// maps to the same path, so config validation errors rooted at "spec" name spec fields.
// `kafka-mirror validate` uses it to check KafkaMirror manifests.
func RenderConfig(m *v1alpha1.KafkaMirror) *config.Config {
	s := &m.Spec
	c := &config.Config{
		APIVersion:    config.APIVersion,
		Kind:          config.Kind,
		Source:        renderCluster(kafka.RoleSource, &s.Source),
		Target:        renderCluster(kafka.RoleTarget, &s.Target),
		ConsumerGroup: ConsumerGroup(m),
		Topics: config.Topics{
			Include: s.Topics.Include,
			Exclude: s.Topics.Exclude,
		},
		Partitioning:            config.Partitioning(s.Partitioning),
		SyncTopics:              config.BoolPtr(false),
		SyncTopicConfigs:        s.SyncTopicConfigs,
		NoDataLoss:              s.NoDataLoss,
		Streams:                 int(s.Streams),
		MaxInFlightPerPartition: int(s.MaxInFlightPerPartition),
		MaxInFlightBytes:        s.MaxInFlightBytes,
		InitialOffset:           config.InitialOffset(s.InitialOffset),
		Delivery:                config.Delivery(s.Delivery),
		Metrics:                 config.Metrics{Address: fmt.Sprintf(":%d", metricsPort)},
	}
	if s.Rack != nil {
		c.Source.Rack = "${" + rackEnv + "}"
	}
	if rf := s.Topics.ReplicationFactor; rf != nil {
		c.Topics.ReplicationFactor = *rf
	}
	if s.Topics.ConfigExclude != nil {
		c.Topics.ConfigExclude = s.Topics.ConfigExclude
	}
	if r := s.Topics.Rename; r != nil {
		c.Topics.Rename = &config.Rename{Prefix: r.Prefix, Template: r.Template, StripPrefix: r.StripPrefix}
	}
	if d := s.TopicSyncInterval; d != nil {
		c.TopicSyncInterval.Duration = d.Duration
	}
	if d := s.OffsetCommitInterval; d != nil {
		c.OffsetCommitInterval.Duration = d.Duration
	}
	if d := s.TransactionInterval; d != nil {
		c.TransactionInterval.Duration = d.Duration
	}
	if d := s.DeliveryTimeout; d != nil {
		c.DeliveryTimeout.Duration = d.Duration
	}
	if p := s.Producer; p != nil {
		c.Producer = &config.Producer{MaxMessageBytes: int(p.MaxMessageBytes), Compression: p.Compression,
			FlushBytes: int(p.FlushBytes), FlushMessages: int(p.FlushMessages), Producers: int(p.Producers),
			MaxInFlightRequests: int(p.MaxInFlightRequests)}
		if p.FlushFrequency != nil {
			c.Producer.FlushFrequency.Duration = p.FlushFrequency.Duration
		}
	}
	// Each pod is a static member of the group under its name, so that a container
	// restarted after a crash or an OOM kill gets its partitions back at once.
	c.Consumer = &config.Consumer{GroupInstanceID: "${" + podNameEnv + "}"}
	if k := s.Consumer; k != nil {
		c.Consumer.FetchMinBytes, c.Consumer.FetchPartitionBytes = k.FetchMinBytes, k.FetchPartitionBytes
		if k.FetchMaxWait != nil {
			c.Consumer.FetchMaxWait.Duration = k.FetchMaxWait.Duration
		}
	}
	for _, h := range s.Handlers {
		hs := config.HandlerSpec{Name: h.Name, Args: h.Args}
		if h.CEL != nil {
			hs.CEL = &config.CELHandler{Filter: h.CEL.Filter, OnError: string(h.CEL.OnError)}
			if t := h.CEL.Transform; t != nil {
				hs.CEL.Transform = &config.CELTransform{Key: t.Key, Value: t.Value, Headers: t.Headers, Topic: t.Topic, Partition: t.Partition}
			}
		}
		c.Handlers = append(c.Handlers, hs)
	}
	if l := s.RebalanceListener; l != nil {
		c.RebalanceListener = &config.PluginSpec{Name: l.Name, Args: l.Args}
	}
	if g := s.Groups; g != nil {
		c.Groups = &config.Groups{Include: g.Include, Exclude: g.Exclude}
		if g.SyncInterval != nil {
			c.Groups.SyncInterval.Duration = g.SyncInterval.Duration
		}
	}
	if p := s.Provenance; p != nil {
		c.Provenance = &config.Provenance{Enabled: p.Enabled, Header: p.Header, MaxHops: int(p.MaxHops),
			Strip: p.Strip, SourceName: p.SourceName, TargetName: p.TargetName}
	}
	c.Default()
	return c
}

// ConsumerGroup is the consumer group a KafkaMirror commits to: spec.consumerGroup, or
// kafka-mirror.<namespace>.<name>. Both parts of the default are immutable, and the API
// server rejects setting or changing spec.consumerGroup after creation, so the group a
// mirror uses never changes during its life.
func ConsumerGroup(m *v1alpha1.KafkaMirror) string {
	if m.Spec.ConsumerGroup != "" {
		return m.Spec.ConsumerGroup
	}
	ns := m.Namespace
	if ns == "" {
		// A manifest checked before apply (kafka-mirror validate) may name no namespace;
		// kubectl would put it in "default" unless told otherwise.
		ns = "default"
	}
	return "kafka-mirror." + ns + "." + m.Name
}

func renderCluster(role string, cl *v1alpha1.ClusterSpec) config.Cluster {
	out := config.Cluster{BootstrapServers: cl.BootstrapServers, ClientID: cl.ClientID}
	if t := cl.TLS; t != nil {
		out.TLS = &config.TLS{InsecureSkipVerify: t.InsecureSkipVerify}
		if t.CASecretRef != nil {
			out.TLS.CAFile = secretFilePath(role+"-ca", caFile)
		}
		for i := range t.CASecretRefs {
			out.TLS.CAFiles = append(out.TLS.CAFiles, secretFilePath(extraCAVolume(role, i), caFile))
		}
		if t.CertSecretRef != nil {
			out.TLS.CertFile = secretFilePath(role+"-cert", certFile)
			out.TLS.KeyFile = secretFilePath(role+"-cert", keyFile)
		}
	}
	if s := cl.SASL; s != nil {
		out.SASL = &config.SASL{Mechanism: string(s.Mechanism), Username: s.Username}
		if s.PasswordSecretRef != nil {
			out.SASL.PasswordFile = secretFilePath(role+"-sasl", passwordFile)
		}
		if o := s.OAuth; o != nil {
			out.SASL.OAuth = &config.OAuth{TokenURL: o.TokenURL, ClientID: o.ClientID, Scopes: o.Scopes,
				Extensions: o.Extensions, ClientSecretFile: secretFilePath(role+"-oauth", clientSecretFile)}
		}
		if a := s.AWS; a != nil {
			out.SASL.AWS = &config.AWS{Region: a.Region, RoleARN: a.RoleARN}
		}
	}
	return out
}
