package topics

import (
	"regexp"

	"github.com/kafka-mirror/kafka-mirror-operator/mirror/config"
)

// LoopTopic reports a topic that two mirrors would pass back and forth for ever: a
// mirrors it from its source into its target, and b, which reads a's target and writes
// a's source, mirrors it back under the name it left with. Mirrors that both have
// provenance on never loop (their engines drop what comes back), nor do mirrors
// between other clusters. Which topics both select is decidable only for names, so the
// names tried are candidates (topics the caller has seen on a's source or b's target)
// and the include expressions of both that are plain names; it returns "" and false
// when none of them loops.
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
	for _, p := range a.Topics.Include {
		if regexp.QuoteMeta(p) == p {
			names = append(names, p)
		}
	}
	for _, p := range b.Topics.Include {
		if regexp.QuoteMeta(p) == p {
			names = append(names, bs.TargetName(p))
		}
	}
	for _, t := range names {
		back := as.TargetName(t)
		if as.Matches(t) && bs.Matches(back) && bs.TargetName(back) == t {
			return t, true
		}
	}
	return "", false
}
