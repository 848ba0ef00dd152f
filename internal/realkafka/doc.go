// Package realkafka starts real Apache Kafka clusters for the tests that must run on the
// broker users run, not on kfake: a real transaction coordinator, log cleaner, retention,
// replication, leader elections and authorizer.
//
// Each broker is a JVM, `java -cp '<jars>/*' kafka.Kafka server.properties`, on loopback
// ports chosen at start, with its log directory under the caller's directory; a cluster is
// 1 node in KRaft combined mode (broker and controller in one process) or 3 such nodes,
// which form the controller quorum. The jars come from Maven Central through
// hack/kafka/pom.xml: `make kafka` (hack/kafka.sh) fetches them once into a cache outside
// the repository and KAFKA_JARS names the directory.
//
//	c, err := realkafka.Start(ctx, dir, realkafka.Options{Name: "source", Brokers: 3})
//	defer c.Close()
//	c.Kill(c.Leader(ctx, "orders", 0)) // kill -9 the partition's leader
//	c.Restart(ctx, id)                 // same ports, same log directory
//
// A test uses StartTest instead, which fails the test when the cluster cannot start,
// closes it when the test ends (also when it fails), and then prints each broker's log tail.
// Every JVM runs through internal/engineproc: in its own process group, killed with
// SIGKILL if the process that started it dies, so that no broker outlives a test binary.
//
// With Options.Secure a cluster also has a SASL_SSL listener (SCRAM-SHA-512, a server
// certificate from a test CA written to CAFile) and runs the StandardAuthorizer with no
// access unless an ACL grants it. The plaintext listener stays, for the tests' own
// clients: its principal, User:ANONYMOUS, is a super user, so a test can create SCRAM
// users and ACLs (AddSCRAMUser, Admin) and audit what the mirror wrote while the mirror
// itself connects through SecureAddrs with only the ACLs it was given.
package realkafka
