package cli

import "github.com/kafka-mirror/kafka-mirror-operator/mirror/config"

// failbackPeer is what a mirror document says about failover and failback, for the
// mirror-loop check across documents (neverMirrorTogether).
type failbackPeer struct {
	// failsBackFrom names the failed-over mirror this one fails back from: for a
	// KafkaMirror its label ("KafkaMirror ns/name", from spec.initialPositions.fromFailover,
	// in this mirror's namespace), for a MirrorConfig that mirror's consumerGroup (from
	// initialPositions.fromFailover). Empty when it fails back from none.
	failsBackFrom string
	// failoverDeclared: a KafkaMirror with spec.failover set.
	failoverDeclared bool
}

// neverMirrorTogether tells whether a and b never run at the same time, so that they
// cannot pass records round between two clusters, with the operator's rule
// (controllers/failback.go): one fails back from the other, or one declares a failover.
// The operator counts a declared failover only once it completed (the mirror then stays
// stopped); validate cannot know that offline, so it takes the declaration for the
// completion and says so in a note (the second result) for the OK line.
func neverMirrorTogether(a, b validMirror) (bool, string) {
	if failsBackFrom(a, b) || failsBackFrom(b, a) {
		return true, ""
	}
	for _, m := range []validMirror{a, b} {
		if m.failoverDeclared {
			return true, "not a mirror loop with " + m.name + ": it declares spec.failover, taken as completed (the mirror stopped); the operator counts the loop until the failover completed"
		}
	}
	return false, ""
}

// failsBackFrom tells whether a's fromFailover names b.
func failsBackFrom(a, b validMirror) bool {
	switch {
	case a.failsBackFrom == "":
		return false
	case a.kafkaMirror:
		return b.kafkaMirror && sameObject(a.failsBackFrom, b.name)
	default:
		return a.failsBackFrom == b.cfg.ConsumerGroup
	}
}

// configFailbackPeer reads a MirrorConfig's initialPositions.fromFailover (a
// MirrorConfig declares no failover: `kafka-mirror failover` is a command).
func configFailbackPeer(c *config.Config) failbackPeer {
	if c.InitialPositions == nil {
		return failbackPeer{}
	}
	return failbackPeer{failsBackFrom: c.InitialPositions.FromFailover}
}
