package topics

import (
	"strings"

	"github.com/kafka-mirror/kafka-mirror-operator/mirror/config"
)

// LoopTopic reports a topic that two mirrors would pass back and forth for ever: a
// mirrors it from its source into its target, and b, which reads a's target and writes
// a's source, mirrors it back under the name it left with. Mirrors that both have
// provenance on never loop (their engines drop what comes back), nor do mirrors
// between other clusters. The names tried are candidates (topics the caller has seen on
// a's source or b's target), the include entries of both that are topic names themselves, and,
// when neither renames (a rename that is not the identity never gives a name back: it
// only lengthens it), the first name both selections accept (commonTopic: include
// minus exclude minus internal topics, decided on the expressions themselves, so a
// topic neither cluster holds yet counts too). It returns "" and false when none of
// them loops. The operator's loop check and `kafka-mirror validate` both use it.
func LoopTopic(a, b *config.Config, candidates ...string) (string, bool) {
	if !a.Source.SameClusterAs(b.Target) || !a.Target.SameClusterAs(b.Source) {
		return "", false
	}
	if a.ProvenanceEnabled() && b.ProvenanceEnabled() {
		return "", false
	}
	as, err := NewSelector(a.Topics)
	if err != nil {
		return "", false
	}
	bs, err := NewSelector(b.Topics)
	if err != nil {
		return "", false
	}
	names := append([]string(nil), candidates...)
	// An include entry that is itself a topic name ("orders", "trial.events") is the
	// name its author had in mind: tried before any other name its expression matches.
	for _, p := range a.Topics.Include {
		if isTopicName(p) {
			names = append(names, p)
		}
	}
	for _, p := range b.Topics.Include {
		if isTopicName(p) {
			names = append(names, bs.TargetName(p))
		}
	}
	for _, t := range names {
		back := as.TargetName(t)
		if as.Matches(t) && bs.Matches(back) && bs.TargetName(back) == t {
			return t, true
		}
	}
	if !isIdentity(a.Topics.Rename) || !isIdentity(b.Topics.Rename) {
		return "", false
	}
	return commonTopic(selection{a.Topics.Include, a.Topics.Exclude}, selection{b.Topics.Include, b.Topics.Exclude})
}

// isTopicName tells whether s is a name Kafka allows for a topic.
func isTopicName(s string) bool {
	return s != "" && len(s) <= maxTopicName && strings.Trim(s, topicAlphabet) == ""
}

// isIdentity tells whether r keeps every topic's name.
func isIdentity(r *config.Rename) bool {
	return r == nil || (r.Prefix == "" && r.StripPrefix == "" && (r.Template == "" || r.Template == "{topic}"))
}
