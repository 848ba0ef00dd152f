package controllers

import (
	"errors"
	"fmt"
	"net"
	"net/url"
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
//
// It also bounds the other addresses a KafkaMirror makes the operator or its pods call
// (WithEndpoints: token URLs now; a schema registry or STS endpoint is one more entry in
// endpointsOf) and whether the operator may assume a role a KafkaMirror names with its own
// identity (WithAssumeRole).
type BootstrapAllowList struct {
	patterns []string
	re       *regexp.Regexp

	// endpoints and endpointsRe bound the endpoint URLs; they apply whenever the list is
	// restricted (bootstrap patterns or endpoint patterns set).
	endpoints   []string
	endpointsRe *regexp.Regexp
	// assumeRole lets the operator assume sasl.aws.roleArn with its own AWS identity.
	assumeRole bool
}

// WithEndpoints returns a copy of a that also bounds endpoint URLs to patterns:
// scheme://host[:port][/path], where `*` in the host or port matches any run of characters
// other than ':' and '/', `*` in the path any characters, a missing port is the scheme's
// default and a missing path admits every path. Matching ignores the case of the scheme and
// host. Once a bootstrap or an endpoint pattern is set, an endpoint no pattern admits is
// refused: an operator that bounds its Kafka clusters sends no credentials to an endpoint
// it was not told about.
func (a BootstrapAllowList) WithEndpoints(patterns []string) (BootstrapAllowList, error) {
	if len(patterns) == 0 {
		return a, nil
	}
	var problems []error
	alts := make([]string, 0, len(patterns))
	for _, p := range patterns {
		re, err := endpointRegexp(p)
		if err != nil {
			problems = append(problems, err)
			continue
		}
		alts = append(alts, re)
	}
	if err := errors.Join(problems...); err != nil {
		return a, err
	}
	re, err := regexp.Compile(`^(` + strings.Join(alts, "|") + `)$`)
	if err != nil {
		return a, fmt.Errorf("while compiling the allowed endpoints: %w", err)
	}
	a.endpoints, a.endpointsRe = append([]string(nil), patterns...), re
	return a, nil
}

// WithAssumeRole returns a copy of a that lets (allow true) or forbids the operator to
// assume a KafkaMirror's sasl.aws.roleArn with its own AWS identity.
func (a BootstrapAllowList) WithAssumeRole(allow bool) BootstrapAllowList {
	a.assumeRole = allow
	return a
}

// endpointRegexp turns one endpoint pattern into a regular expression over the normalised
// URL that normaliseEndpoint returns.
func endpointRegexp(p string) (string, error) {
	scheme, rest, ok := strings.Cut(p, "://")
	scheme = strings.ToLower(scheme)
	if !ok || (scheme != "https" && scheme != "http") || rest == "" {
		return "", fmt.Errorf("allowed endpoint %q is not an http(s) URL (write https://host[:port][/path])", p)
	}
	authority, path, hasPath := strings.Cut(rest, "/")
	if authority == "" || strings.Contains(authority, "@") {
		return "", fmt.Errorf("allowed endpoint %q has no host, or carries user information", p)
	}
	if i := strings.LastIndex(authority, ":"); i < 0 || strings.HasSuffix(authority, "]") {
		authority += ":" + defaultPort(scheme)
	}
	host := strings.ReplaceAll(regexp.QuoteMeta(authority), `\*`, `[^:/]*`)
	pathRe := `(/.*)?`
	if hasPath {
		pathRe = strings.ReplaceAll(regexp.QuoteMeta("/"+path), `\*`, `.*`)
	}
	return `(?i:` + scheme + `://` + host + `)` + pathRe, nil
}

func defaultPort(scheme string) string {
	if scheme == "http" {
		return "80"
	}
	return "443"
}

// normaliseEndpoint writes an endpoint URL as scheme://host:port/path (scheme and host
// lower-cased, the default port filled in, query and fragment dropped), or says why it
// cannot be admitted.
func normaliseEndpoint(raw string) (string, error) {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Hostname() == "" {
		return "", errors.New("is not an http(s) URL")
	}
	if u.User != nil {
		return "", errors.New("carries user information")
	}
	port := u.Port()
	if port == "" {
		port = defaultPort(u.Scheme)
	}
	return strings.ToLower(u.Scheme) + "://" + net.JoinHostPort(strings.ToLower(u.Hostname()), port) + u.EscapedPath(), nil
}

// restricted tells whether any allow-list is set.
func (a BootstrapAllowList) restricted() bool { return a.re != nil || a.endpointsRe != nil }

// AllowsEndpoint reports whether the endpoint URL may be called.
func (a BootstrapAllowList) AllowsEndpoint(raw string) bool {
	if !a.restricted() {
		return true
	}
	n, err := normaliseEndpoint(raw)
	return err == nil && a.endpointsRe != nil && a.endpointsRe.MatchString(n)
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

// notAllowedError lists what of a KafkaMirror the operator's allow-list refuses, each
// with its field path. It stalls the KafkaMirror with reason: the first kind of problem
// in the order bootstrap server, endpoint, assumed role.
type notAllowedError struct {
	reason   string
	problems []string
}

func (e *notAllowedError) Error() string { return strings.Join(e.problems, "; ") }

// endpoint is one URL a KafkaMirror makes the operator or its pods call, with its field.
type endpoint struct {
	path *field.Path
	url  string
}

// endpointsOf lists every endpoint URL m names: the OAuth token URLs. A schema registry
// or an STS endpoint is one more entry here, and is then checked like them.
func endpointsOf(m *v1alpha1.KafkaMirror) []endpoint {
	var out []endpoint
	for _, c := range []struct {
		role string
		cl   *v1alpha1.ClusterSpec
	}{{"source", &m.Spec.Source}, {"target", &m.Spec.Target}} {
		if s := c.cl.SASL; s != nil && s.OAuth != nil {
			out = append(out, endpoint{path: field.NewPath("spec", c.role, "sasl", "oauth", "tokenUrl"), url: s.OAuth.TokenURL})
		}
	}
	return out
}

// checkReach returns a *notAllowedError when m names a bootstrap server or an endpoint
// outside allowed, or an AWS role the operator may not assume. It runs before any step
// that dials Kafka or an endpoint, so a refused address is never contacted and no
// credential is sent there. The message repeats the address (the user wrote it) and the
// patterns, nothing else of the spec: no credentials can reach the status through it.
func checkReach(m *v1alpha1.KafkaMirror, allowed BootstrapAllowList) error {
	var problems []string
	reason := ""
	refuse := func(r, msg string) {
		if reason == "" {
			reason = r
		}
		problems = append(problems, msg)
	}
	for _, c := range []struct {
		path    *field.Path
		servers []string
	}{
		{field.NewPath("spec", "source", "bootstrapServers"), m.Spec.Source.BootstrapServers},
		{field.NewPath("spec", "target", "bootstrapServers"), m.Spec.Target.BootstrapServers},
	} {
		for i, s := range c.servers {
			if !allowed.Allows(s) {
				refuse(v1alpha1.ReasonBootstrapServerNotAllowed, fmt.Sprintf("%s: %q is not in the operator's allowed bootstrap servers (%s)", c.path.Index(i), s, allowed))
			}
		}
	}
	for _, e := range endpointsOf(m) {
		if !allowed.AllowsEndpoint(e.url) {
			list := strings.Join(allowed.endpoints, ",")
			if list == "" {
				list = "none: set --allowed-endpoints"
			}
			refuse(v1alpha1.ReasonEndpointNotAllowed, fmt.Sprintf("%s: %q is not in the operator's allowed endpoints (%s)", e.path, e.url, list))
		}
	}
	if !allowed.assumeRole {
		for _, c := range []struct {
			role string
			cl   *v1alpha1.ClusterSpec
		}{{"source", &m.Spec.Source}, {"target", &m.Spec.Target}} {
			if s := c.cl.SASL; s != nil && s.AWS != nil && s.AWS.RoleARN != "" {
				refuse(v1alpha1.ReasonAssumeRoleNotAllowed, fmt.Sprintf("%s: the operator does not assume a role named in a KafkaMirror with its own AWS identity "+
					"(it would lend that identity to everyone who may edit KafkaMirrors); give the mirror's service account the role instead, "+
					"or start the operator with --allow-assume-role", field.NewPath("spec", c.role, "sasl", "aws", "roleArn")))
			}
		}
	}
	if len(problems) > 0 {
		return &notAllowedError{reason: reason, problems: problems}
	}
	return nil
}
