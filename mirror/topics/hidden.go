package topics

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/IBM/sarama"
)

// HiddenInclude is a topics.include expression that selects none of the topics the
// source lists while the source refuses the mirror's principal Describe on a topic name
// the expression stands for. Kafka leaves the topics a principal may not Describe out
// of its metadata, so topics the expression would select may exist there unseen.
type HiddenInclude struct {
	// Index is the expression's position in topics.include.
	Index int
	// Pattern is the expression as written.
	Pattern string
	// Name is the topic name the source was asked about: the expression itself when it
	// is a literal name ("payments"), else its literal prefix ("orders." of orders\..*).
	Name string
	// Literal says that Name is the whole expression.
	Literal bool
}

// Describe says what is hidden and what to grant, for logs and status; principal is
// the mirror's source principal ("User:mirror"), "" when it is not known here.
func (h HiddenInclude) Describe(principal string) string {
	who := "the mirror's source principal"
	if principal != "" {
		who = "the mirror's source principal " + principal
	}
	if h.Literal {
		return fmt.Sprintf("source topic %q (topics.include[%d]) is not visible: %s is not authorized to DESCRIBE TOPIC %q "+
			"(the source answers TOPIC_AUTHORIZATION_FAILED; it may also not exist); grant Read on it, which implies Describe",
			h.Name, h.Index, who, h.Name)
	}
	return fmt.Sprintf("no source topic matching topics.include[%d] %q is visible and %s is not authorized to DESCRIBE TOPIC %q "+
		"(the source answers TOPIC_AUTHORIZATION_FAILED): topics it may not Describe are hidden from it, so matching topics may exist "+
		"unseen (or none exists yet); grant Read, which implies Describe, on them (for example a PREFIXED ACL on %q)",
		h.Index, h.Pattern, who, h.Name, h.Name)
}

// HiddenIncludes asks the source, through client, about the include expressions of sel
// that match none of visible (the topics its metadata lists): for each, by name, about
// the expression itself when it is a literal topic name, else about its literal prefix
// (a PREFIXED ACL that grants the topics also covers the prefix). A principal refused
// Describe on a topic it names explicitly gets TOPIC_AUTHORIZATION_FAILED whether or
// not the topic exists, where a topic merely missing gets UNKNOWN_TOPIC_OR_PARTITION;
// only the refused ones are returned. The request never creates a topic.
func HiddenIncludes(client sarama.Client, sel *Selector, visible []string) ([]HiddenInclude, error) {
	probes := sel.unmatchedProbes(visible)
	if len(probes) == 0 {
		return nil, nil
	}
	names := make([]string, 0, len(probes))
	seen := map[string]bool{}
	for _, p := range probes {
		if !seen[p.Name] {
			seen[p.Name] = true
			names = append(names, p.Name)
		}
	}
	broker := client.LeastLoadedBroker()
	if broker == nil {
		return nil, errors.New("while asking the source about unlisted topics: no broker is connected")
	}
	if err := broker.Open(client.Config()); err != nil && !errors.Is(err, sarama.ErrAlreadyConnected) {
		return nil, fmt.Errorf("while asking the source about unlisted topics: %w", err)
	}
	req := sarama.NewMetadataRequest(client.Config().Version, names)
	req.AllowAutoTopicCreation = false
	resp, err := broker.GetMetadata(req)
	if err != nil {
		return nil, fmt.Errorf("while asking the source about unlisted topics %q: %w", names, err)
	}
	refused := map[string]bool{}
	for _, t := range resp.Topics {
		if errors.Is(t.Err, sarama.ErrTopicAuthorizationFailed) {
			refused[t.Name] = true
		}
	}
	var out []HiddenInclude
	for _, p := range probes {
		if refused[p.Name] {
			out = append(out, p)
		}
	}
	return out, nil
}

// unmatchedProbes returns an entry for each include expression that matches none of
// visible and stands for a name that can be asked about: itself when it is a literal
// topic name the selection does not exclude, else its literal prefix when that is a
// valid topic name.
func (s *Selector) unmatchedProbes(visible []string) []HiddenInclude {
	var out []HiddenInclude
	for i, re := range s.include {
		if slices.ContainsFunc(visible, func(t string) bool { return re.MatchString(t) && !strings.HasPrefix(t, internalPrefix) }) {
			continue
		}
		raw, err := regexp.Compile(s.includeSrc[i])
		if err != nil {
			continue // NewSelector compiled it already
		}
		prefix, complete := raw.LiteralPrefix()
		switch {
		case complete && !s.Matches(prefix):
			continue // excluded or internal: not mirrored even when visible
		case !validTopicName(prefix) || strings.HasPrefix(prefix, internalPrefix):
			continue
		}
		out = append(out, HiddenInclude{Index: i, Pattern: s.includeSrc[i], Name: prefix, Literal: complete})
	}
	return out
}

// validTopicName reports whether name is a topic name Kafka accepts.
func validTopicName(name string) bool {
	if name == "" || name == "." || name == ".." || len(name) > 249 {
		return false
	}
	for _, r := range name {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-') {
			return false
		}
	}
	return true
}
