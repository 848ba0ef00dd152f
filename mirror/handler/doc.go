// Package handler runs user logic in the mirror pipeline: CEL filters and transforms,
// named handlers from a registry (with args), handler chains, and rebalance listeners.
// A team can register its own Handler or RebalanceListener from its own main package
// and reuse the kafka-mirror command line.
//
// # Chains
//
// NewChain builds the config's `handlers:` list into one Handler. Steps run in order;
// each sees every record the previous one emitted, so a step can drop a record (emit
// nothing), change it, or fan it out (emit several). All expressions are compiled and
// all named handlers built when the chain is built; every problem is reported at once
// with its field path, for example
//
//	handlers[0].name: unknown handler "x" (registered: identity, header-filter, topic-router)
//	handlers[1].args.pattern: error parsing regexp: missing closing ): `a(`
//	handlers[2].cel.filter: 1:8: undefined field 'topik'
//	 | record.topik == 'x'
//	 | .......^
//
// A step's run-time error stops the engine (the record is not committed) unless the
// step is a CEL step with `onError: skip`: then the chain returns an error for which
// IsSkip is true, the whole source record is dropped (none of its outputs is sent) and
// the engine counts it as skipped and goes on. Chains are safe for concurrent use when
// their named handlers are; the built-ins are.
//
// # CEL steps
//
// A `cel:` step has an optional `filter` (a bool expression; false drops the record)
// and an optional `transform` with one expression per record part: `key`, `value`,
// `headers`, `topic`, `partition`. Transforms all see the record as it came into the
// step and are applied together; parts without an expression stay as they were.
//
// Expressions see one variable, `record`, with these fields:
//
//	record.topic       string     the source topic (or what an earlier step set)
//	record.partition   int        the source partition (or what an earlier step set)
//	record.offset      int        the source offset
//	record.timestamp   timestamp  the record timestamp
//	record.key         bytes      b'' when null; has(record.key) is false for a null key
//	record.value       bytes      b'' when null; has(record.value) is false for a tombstone
//	record.headers     map(string, bytes)  when a key repeats, the LAST header wins
//	record.headerList  list of {"key": string, "value": bytes or null}, every header in order
//
// Helpers besides CEL's standard library (string(bytes) reads UTF-8 text, size, matches,
// timestamps, ...) and the cel-go extensions for strings (lowerAscii, split, ...),
// base64, math and cel.bind:
//
//	json(bytes) / json(string) -> dyn   parses JSON: objects are maps, arrays lists,
//	                                    integral numbers int, other numbers double
//	toJSON(dyn) -> bytes                compact JSON with sorted object keys; bytes are
//	                                    written as base64, timestamps as RFC 3339
//
// Examples:
//
//	filter: "!('skip' in record.headers)"
//	filter: "json(record.value).region == 'eu'"
//	filter: "has(record.value)"                      # drop tombstones
//	transform: {topic: "'audit.' + record.topic"}
//	transform: {value: "toJSON({'id': json(record.value).id, 'src': record.topic})"}
//	transform: {headers: "record.headerList.filter(h, h.key != 'internal')"}
//	transform: {value: "record.value.size() > 0 ? dyn(record.value) : null"}
//
// Results: `key` and `value` give bytes, a string (written as UTF-8) or null; `headers`
// gives a map(string, bytes|string|null) (written sorted by key) or a list whose
// elements are [key, value] pairs or {"key": k, "value": v} maps (written in order,
// duplicates kept); `topic` gives a valid Kafka topic name (the engine applies
// topics.rename after the chain); `partition` gives an int from 0 to 2^31-1. A
// conditional mixing bytes and null needs dyn() on one side, as above.
//
// Every expression is type-checked once, when the chain is built, so a misspelt field
// or a result of the wrong type is a config error, not a run-time one. Evaluation is
// bounded by a cost limit (WithCostLimit, CEL's cost units) and, for expressions with
// loops (all, exists, map, filter), by a per-record deadline (WithEvalTimeout); other
// expressions cannot loop and are bounded by the cost limit alone. Expressions whose
// static worst-case cost is under the limit skip run-time cost tracking for records of
// up to 1 MiB per part and 256 headers, which keeps a header filter near 100 ns and
// allocation-free; larger records are tracked.
//
// # Named handlers
//
// Register(name, factory) adds a handler; a config step `{name: NAME, args: {...}}`
// builds it. Factories validate their args and return an *ArgError naming the bad one
// (CheckArgs rejects unknown args). The built-ins:
//
//	identity                 emits every record unchanged (no args)
//	header-filter            keeps or drops records by a header:
//	    mode: keep|drop      (required) keep emits matching records only, drop the others
//	    header: NAME         (required) the header key
//	    value: TEXT          (optional) match only when that header has exactly this value
//	topic-router             routes matching records to another target topic:
//	    pattern: REGEX       (required) RE2, must match the whole input
//	    on: topic|key|header:NAME   what is matched (default topic)
//	    topic: NAME          (required) the target topic; may use $1 or ${name} groups
//
// # Rebalance listeners
//
// RegisterListener(name, factory) adds a listener; `rebalanceListener: {name, args}`
// selects it and NewListener builds it. The listener NewListener returns contains the
// user's: errors, panics and calls running past WithListenerTimeout are logged,
// counted and passed to the OnListenerError hook, never returned, so a listener cannot
// block or break the engine's drain. The built-in `log` listener (arg `verbosity`, the
// logr V-level, default 0) logs each assignment change.
package handler
