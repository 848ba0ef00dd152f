// Package config holds the mirror engine's configuration file, the contract between the
// operator and the engine: the operator renders a KafkaMirror into this schema (the
// ConfigMap key mirror.yaml) and a user outside Kubernetes writes it by hand for
// `kafka-mirror run --config mirror.yaml`.
//
// The file is versioned (apiVersion kafkamirror.io/v1alpha1, kind MirrorConfig). Defaults
// are filled in one place (Config.Default) and Config.Validate reports every problem at
// once, each with its field path. Credentials never appear in the file: it names files
// (passwordFile, caFile, certFile, keyFile) that hold them.
package config
