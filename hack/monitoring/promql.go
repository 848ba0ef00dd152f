package main

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql/parser"
)

// expression is one PromQL expression of the dashboard or the rules, with where it came from.
type expression struct {
	Where, Expr string
}

// grafanaRange stands in for Grafana's $__rate_interval, which the PromQL parser does not know.
const grafanaRange = "5m"

var labelValuesCall = regexp.MustCompile(`^label_values\((.+),\s*([a-zA-Z_][a-zA-Z0-9_]*)\)$`)

// toPromQL turns a Grafana query into PromQL: $__rate_interval becomes a fixed range and
// a label_values(selector, label) variable query becomes its selector (the label is
// returned apart, so it can be checked too). Other $variables sit inside label matcher
// strings, where PromQL takes them as text.
func toPromQL(q string) (expr, label string) {
	q = strings.ReplaceAll(q, "$__rate_interval", grafanaRange)
	if m := labelValuesCall.FindStringSubmatch(q); m != nil {
		return m[1], m[2]
	}
	return q, ""
}

// selectorUse is what an expression asks of one metric: the labels its matchers name.
type selectorUse struct {
	Metric string
	Labels []string
}

// groupingUse is a set of labels an aggregation or a vector match groups by, and the
// metrics below it (one of which must carry each label).
type groupingUse struct {
	Labels  []string
	Metrics []string
}

// usage lists the metrics and labels an expression names.
type usage struct {
	Selectors []selectorUse
	Groupings []groupingUse
}

// inspect parses expr and returns the metrics and labels it names.
func inspect(expr string) (usage, error) {
	e, err := parser.NewParser(parser.Options{}).ParseExpr(expr)
	if err != nil {
		return usage{}, err
	}
	var u usage
	parser.Inspect(e, func(n parser.Node, _ []parser.Node) error {
		switch n := n.(type) {
		case *parser.VectorSelector:
			s := selectorUse{Metric: metricName(n)}
			for _, m := range n.LabelMatchers {
				if m.Name != labels.MetricName {
					s.Labels = append(s.Labels, m.Name)
				}
			}
			u.Selectors = append(u.Selectors, s)
		case *parser.AggregateExpr:
			if len(n.Grouping) > 0 && !n.Without {
				u.Groupings = append(u.Groupings, groupingUse{Labels: n.Grouping, Metrics: metricsUnder(n.Expr)})
			}
		case *parser.BinaryExpr:
			if n.VectorMatching != nil && n.VectorMatching.On && len(n.VectorMatching.MatchingLabels) > 0 {
				u.Groupings = append(u.Groupings, groupingUse{Labels: n.VectorMatching.MatchingLabels, Metrics: metricsUnder(n)})
			}
		}
		return nil
	})
	return u, nil
}

func metricName(v *parser.VectorSelector) string {
	if v.Name != "" {
		return v.Name
	}
	for _, m := range v.LabelMatchers {
		if m.Name == labels.MetricName {
			return m.Value
		}
	}
	return ""
}

func metricsUnder(n parser.Node) []string {
	var names []string
	parser.Inspect(n, func(n parser.Node, _ []parser.Node) error {
		if v, ok := n.(*parser.VectorSelector); ok && !slices.Contains(names, metricName(v)) {
			names = append(names, metricName(v))
		}
		return nil
	})
	return names
}

// exposition is a scrape: metric name -> the label names its series carry.
type exposition map[string]map[string]bool

// sample is one line of a text exposition.
type sample struct {
	Name   string
	Labels map[string]string
	Value  float64
}

// parseSamples reads the Prometheus text format as client_golang writes it (no
// timestamps): every sample line's metric name, labels and value.
func parseSamples(text string) ([]sample, error) {
	var out []sample
	for i, line := range strings.Split(text, "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		end := strings.IndexAny(line, "{ ")
		if end <= 0 {
			return nil, fmt.Errorf("line %d: no metric name in %q", i+1, line)
		}
		s := sample{Name: line[:end], Labels: map[string]string{}}
		rest := line[end:]
		if rest[0] == '{' {
			rest = rest[1:]
			for len(rest) > 0 && rest[0] != '}' {
				eq := strings.IndexByte(rest, '=')
				if eq < 0 || len(rest) < eq+2 || rest[eq+1] != '"' {
					return nil, fmt.Errorf("line %d: bad labels in %q", i+1, line)
				}
				var value strings.Builder
				j := eq + 2
				for ; j < len(rest) && rest[j] != '"'; j++ {
					if rest[j] == '\\' && j+1 < len(rest) {
						j++
					}
					value.WriteByte(rest[j])
				}
				if j >= len(rest) {
					return nil, fmt.Errorf("line %d: unterminated label value in %q", i+1, line)
				}
				s.Labels[strings.TrimSpace(rest[:eq])] = value.String()
				rest = strings.TrimPrefix(rest[j+1:], ",")
			}
			rest = strings.TrimPrefix(rest, "}")
		}
		fields := strings.Fields(rest)
		if len(fields) == 0 {
			return nil, fmt.Errorf("line %d: no value in %q", i+1, line)
		}
		v, err := strconv.ParseFloat(fields[0], 64)
		if err != nil {
			return nil, fmt.Errorf("line %d: bad value in %q: %w", i+1, line, err)
		}
		s.Value = v
		out = append(out, s)
	}
	return out, nil
}

// parseExposition reads a text exposition into the label names of each metric.
func parseExposition(text string) (exposition, error) {
	samples, err := parseSamples(text)
	if err != nil {
		return nil, err
	}
	out := exposition{}
	for _, s := range samples {
		if out[s.Name] == nil {
			out[s.Name] = map[string]bool{}
		}
		for l := range s.Labels {
			out[s.Name][l] = true
		}
	}
	return out, nil
}

// merge adds the metrics of o to e.
func (e exposition) merge(o exposition) {
	for name, ls := range o {
		if e[name] == nil {
			e[name] = map[string]bool{}
		}
		for l := range ls {
			e[name][l] = true
		}
	}
}
