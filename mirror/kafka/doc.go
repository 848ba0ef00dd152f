// Package kafka turns the engine's config file (mirror/config) into sarama
// configurations: addresses, client id, TLS, SASL PLAIN and SCRAM, the protocol version,
// and the no-data-loss settings of the mirror's producer and consumers.
//
// Both the engine (`kafka-mirror run`) and the operator use it, so a cluster is reached
// the same way from either. The operator holds Secret data in memory rather than in
// mounted files and passes WithFileReader to read it from there.
//
// Every error names the cluster role and the config field it comes from, for example
// `source.sasl.passwordFile: open /etc/pw: no such file or directory`.
package kafka
