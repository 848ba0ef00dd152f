//go:build e2e

package e2e

import (
	"testing"

	"github.com/kafka-mirror/kafka-mirror-operator/internal/e2eharness"
)

// engine is one kafka-mirror run process (internal/e2eharness, shared with test/e2ekafka).
type engine = e2eharness.Engine

// engineBinary is the kafka-mirror binary under test.
func engineBinary(t *testing.T) string { return e2eharness.EngineBinary(t, "e2e") }
