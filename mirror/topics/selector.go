package topics

import (
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strings"

	"github.com/kafka-mirror/kafka-mirror-operator/mirror/config"
)

// internalPrefix marks Kafka's own topics (__consumer_offsets, __transaction_state, ...).
// Mirroring them would copy one cluster's group and transaction state over another's.
const internalPrefix = "__"

// Selector decides which source topics are mirrored and names their targets.
// It is safe for concurrent use.
type Selector struct {
	// includeSrc holds the include expressions as written, for HiddenIncludes.
	includeSrc []string
	include    []*regexp.Regexp
	exclude    []*regexp.Regexp
	rename     *config.Rename
}

// NewSelector compiles the include and exclude expressions of t. Each expression must
// match a whole topic name: "orders" selects orders but not orders.eu. The error names
// the offending field, as config.Validate does.
func NewSelector(t config.Topics) (*Selector, error) {
	include, err := compileAll("topics.include", t.Include)
	if err != nil {
		return nil, err
	}
	exclude, err := compileAll("topics.exclude", t.Exclude)
	if err != nil {
		return nil, err
	}
	var rename *config.Rename
	if t.Rename != nil {
		r := *t.Rename
		rename = &r
	}
	return &Selector{includeSrc: slices.Clone(t.Include), include: include, exclude: exclude, rename: rename}, nil
}

// compileAll anchors every expression so that it must match the whole name; a user who
// writes "orders" does not expect "orders-archive" to be mirrored too.
func compileAll(field string, patterns []string) ([]*regexp.Regexp, error) {
	out := make([]*regexp.Regexp, 0, len(patterns))
	for i, p := range patterns {
		// Compile the expression alone first: "a)|(b" is invalid, yet wrapped in the
		// anchoring group it would compile and match far more than intended.
		if _, err := regexp.Compile(p); err != nil {
			return nil, fmt.Errorf("%s[%d]: invalid regular expression %q: %w", field, i, p, err)
		}
		re, err := regexp.Compile("^(?:" + p + ")$")
		if err != nil {
			return nil, fmt.Errorf("%s[%d]: invalid regular expression %q: %w", field, i, p, err)
		}
		out = append(out, re)
	}
	return out, nil
}

// Matches reports whether the source topic is mirrored: it matches an include
// expression, no exclude expression, is not an internal topic, and has a target name
// (rename.stripPrefix: it starts with the prefix).
func (s *Selector) Matches(topic string) bool {
	if topic == "" || strings.HasPrefix(topic, internalPrefix) || !s.rename.Selects(topic) {
		return false
	}
	for _, re := range s.exclude {
		if re.MatchString(topic) {
			return false
		}
	}
	for _, re := range s.include {
		if re.MatchString(topic) {
			return true
		}
	}
	return false
}

// TargetName returns the target topic name for a source topic (prefix, template or
// stripPrefix rename; the same name when no rename is configured).
func (s *Selector) TargetName(source string) string {
	return s.rename.TargetTopic(source)
}

// Select returns the names in topics that Matches accepts, sorted and without
// duplicates.
func (s *Selector) Select(topics []string) []string {
	out := make([]string, 0, len(topics))
	seen := make(map[string]bool, len(topics))
	for _, t := range topics {
		if !seen[t] && s.Matches(t) {
			seen[t] = true
			out = append(out, t)
		}
	}
	sort.Strings(out)
	return out
}
