// Package handler runs user logic in the mirror pipeline: CEL filters and transforms,
// named handlers from a registry (with args), handler chains, and rebalance listeners.
// A team can register its own Handler or RebalanceListener from its own main package
// and reuse the kafka-mirror command line.
package handler
