// Package pipeline is a produce path of the mirror's own over sarama's broker API: an
// idempotent producer that keeps up to N record batches per partition in flight (as
// Kafka's Java producer does with max.in.flight.requests.per.connection), where sarama's
// idempotent producer allows one open request per broker. It implements
// sarama.AsyncProducer so that it takes the place of a batching producer in the engine's
// pool (producer.maxInFlightRequests above 1).
//
// Order and no-loss rest on Kafka's idempotence: every batch of a partition carries the
// producer ID, epoch and the next sequence numbers; the broker writes a batch only when
// its sequence follows the last one written and answers a batch it already wrote with
// its original offset. A batch that failed in a way a retry can cure stops the
// partition: nothing new is sent until every request in flight answered, then every
// un-acked batch is sent again, in order, with the same sequences. Anything else is
// handed back on Errors (the engine stops; the restart sends the records again).
package pipeline
