package controllers

import (
	"errors"
	"fmt"
	"regexp"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/kafka-mirror/kafka-mirror-operator/api/v1alpha1"
)

// BootstrapAllowList is the set of Kafka addresses the operator may make itself and the
// mirror pods connect to (--allowed-bootstrap-servers). Each pattern matches a whole
// host:port, case-insensitively; `*` stands for any run of characters other than ':'
// (so `*.kafka.svc:9092` or `kafka-*.example.com:*`), every other character is literal.
// The chart's ValidatingAdmissionPolicy turns the same patterns into the same regular
// expression (AllowListRegexp), so admission and reconcile agree. The zero value allows
// every address.
type BootstrapAllowList struct {
	patterns []string
	re       *regexp.Regexp
}

// NewBootstrapAllowList parses patterns; an empty list allows every address. A pattern
// must name a port (or `*`) after its last ':'.
func NewBootstrapAllowList(patterns []string) (BootstrapAllowList, error) {
	if len(patterns) == 0 {
		return BootstrapAllowList{}, nil
	}
	var problems []error
	for _, p := range patterns {
		i := strings.LastIndex(p, ":")
		if i <= 0 || i == len(p)-1 {
			problems = append(problems, fmt.Errorf("allowed bootstrap server %q is not host:port (write host:* for any port)", p))
		}
	}
	if err := errors.Join(problems...); err != nil {
		return BootstrapAllowList{}, err
	}
	re, err := regexp.Compile(AllowListRegexp(patterns))
	if err != nil {
		return BootstrapAllowList{}, fmt.Errorf("while compiling the allowed bootstrap servers: %w", err)
	}
	return BootstrapAllowList{patterns: append([]string(nil), patterns...), re: re}, nil
}

// AllowListRegexp returns the regular expression (RE2, as Go and CEL's matches() use)
// that accepts exactly the addresses patterns allow.
func AllowListRegexp(patterns []string) string {
	alts := make([]string, len(patterns))
	for i, p := range patterns {
		alts[i] = strings.ReplaceAll(regexp.QuoteMeta(p), `\*`, `[^:]*`)
	}
	return `(?i)^(` + strings.Join(alts, "|") + `)$`
}

// Allows reports whether address may be dialled.
func (a BootstrapAllowList) Allows(address string) bool {
	return a.re == nil || a.re.MatchString(address)
}

// String lists the patterns, for logs and messages.
func (a BootstrapAllowList) String() string { return strings.Join(a.patterns, ",") }

// notAllowedError lists the bootstrap servers of a KafkaMirror outside the allow-list,
// each with its field path. It stalls the KafkaMirror with ReasonBootstrapServerNotAllowed.
type notAllowedError struct{ problems []string }

func (e *notAllowedError) Error() string { return strings.Join(e.problems, "; ") }

// checkReach returns a *notAllowedError when m names a bootstrap server outside allowed.
// It runs before any step that dials Kafka, so a refused address is never contacted.
// The message repeats the address (the user wrote it) and the patterns, nothing else of
// the spec: no credentials can reach the status through it.
func checkReach(m *v1alpha1.KafkaMirror, allowed BootstrapAllowList) error {
	var problems []string
	for _, c := range []struct {
		path    *field.Path
		servers []string
	}{
		{field.NewPath("spec", "source", "bootstrapServers"), m.Spec.Source.BootstrapServers},
		{field.NewPath("spec", "target", "bootstrapServers"), m.Spec.Target.BootstrapServers},
	} {
		for i, s := range c.servers {
			if !allowed.Allows(s) {
				problems = append(problems, fmt.Sprintf("%s: %q is not in the operator's allowed bootstrap servers (%s)", c.path.Index(i), s, allowed))
			}
		}
	}
	if len(problems) > 0 {
		return &notAllowedError{problems: problems}
	}
	return nil
}
