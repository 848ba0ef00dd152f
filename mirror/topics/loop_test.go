package topics

import (
	"strings"
	"testing"

	"github.com/kafka-mirror/kafka-mirror-operator/mirror/config"
)

// TestLoopTopic: two mirrors in opposite directions loop on any topic both select
// under its own name, whether the include entries are plain names or regular
// expressions, unless provenance is on in both or a rename keeps the names apart; the
// topic named is one both really select.
func TestLoopTopic(t *testing.T) {
	dc1, dc2, dc3 := []string{"kafka.dc1:9092"}, []string{"kafka.dc2:9092"}, []string{"kafka.dc3:9092"}
	type side struct {
		from, to         []string
		include, exclude []string
		rename           *config.Rename
		provenance       bool
	}
	cfg := func(s side) *config.Config {
		c := &config.Config{
			Source: config.Cluster{BootstrapServers: s.from}, Target: config.Cluster{BootstrapServers: s.to},
			Topics: config.Topics{Include: s.include, Exclude: s.exclude, Rename: s.rename},
		}
		if s.provenance {
			c.Provenance = &config.Provenance{Enabled: true}
		}
		c.Default()
		return c
	}
	ab := func(include ...string) side { return side{from: dc1, to: dc2, include: include} }
	ba := func(include ...string) side { return side{from: dc2, to: dc1, include: include} }
	with := func(s side, f func(*side)) side { f(&s); return s }
	tests := map[string]struct {
		a, b       side
		candidates []string
		want       string // "" for no loop
	}{
		"plain names both ways":                 {a: ab("trial.events"), b: ba("trial.events"), want: "trial.events"},
		"regular expressions both ways":         {a: ab(`trial\..*`), b: ba(`trial\..*`), want: "trial."},
		"a plain name against an expression":    {a: ab(`trial\..*`), b: ba("trial.events"), want: "trial.events"},
		"overlapping character classes":         {a: ab(`[a-c]+x`), b: ba(`[c-e]+x`), want: "cx"},
		"alternation":                           {a: ab(`(orders|payments)\.eu`), b: ba(`pay.*`), want: "payments.eu"},
		"case-insensitive flag":                 {a: ab(`(?i)ORDERS`), b: ba(`orders`), want: "orders"},
		"word boundary":                         {a: ab(`\borders\b.*`), b: ba(`orders-x`), want: "orders-x"},
		"everything both ways":                  {a: ab(`.*`), b: ba(`.+`), want: "a"},
		"identity template":                     {a: with(ab(`x.*`), func(s *side) { s.rename = &config.Rename{Template: "{topic}"} }), b: ba(`x.*`), want: "x"},
		"a candidate seen in status":            {a: ab(`orders\..*`), b: ba(`orders\..*`), candidates: []string{"orders.eu"}, want: "orders.eu"},
		"disjoint expressions":                  {a: ab(`orders\..*`), b: ba(`payments\..*`)},
		"disjoint character classes":            {a: ab(`[a-b]+`), b: ba(`[c-d]+`)},
		"the overlap is excluded on one side":   {a: with(ab(`orders\..*`), func(s *side) { s.exclude = []string{`orders\.tmp\..*`} }), b: ba(`orders\.tmp\..*`)},
		"the overlap is excluded on the other":  {a: ab(`.*`), b: with(ba(`.*`), func(s *side) { s.exclude = []string{`.*`} })},
		"only internal topics overlap":          {a: ab(`__.*`), b: ba(`__consumer_offsets`)},
		"only characters Kafka refuses overlap": {a: ab(`a\sb`), b: ba(`a.b`)},
		"a prefix on one side":                  {a: with(ab(`orders\..*`), func(s *side) { s.rename = &config.Rename{Prefix: "dc1."} }), b: ba(`.*`)},
		"a template on one side":                {a: ab(`.*`), b: with(ba(`.*`), func(s *side) { s.rename = &config.Rename{Template: "{topic}.dc2"} })},
		"a prefix reversed by stripPrefix":      {a: with(ab(`orders`), func(s *side) { s.rename = &config.Rename{Prefix: "dc1."} }), b: with(ba(`dc1.orders`), func(s *side) { s.rename = &config.Rename{StripPrefix: "dc1."} }), want: "orders"},
		"stripPrefix of another prefix":         {a: with(ab(`orders`), func(s *side) { s.rename = &config.Rename{Prefix: "dc1."} }), b: with(ba(`dc1.orders`), func(s *side) { s.rename = &config.Rename{StripPrefix: "dc1.o"} })},
		"provenance on both":                    {a: with(ab(`.*`), func(s *side) { s.provenance = true }), b: with(ba(`.*`), func(s *side) { s.provenance = true })},
		"provenance on one only":                {a: with(ab(`orders`), func(s *side) { s.provenance = true }), b: ba(`.*`), want: "orders"},
		"same direction":                        {a: ab(`.*`), b: ab(`.*`)},
		"a third cluster":                       {a: ab(`.*`), b: side{from: dc3, to: dc1, include: []string{`.*`}}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			a, b := cfg(tc.a), cfg(tc.b)
			got, loops := LoopTopic(a, b, tc.candidates...)
			if got != tc.want || loops != (tc.want != "") {
				t.Fatalf("LoopTopic = %q, %v; want %q", got, loops, tc.want)
			}
			if !loops {
				return
			}
			as, _ := NewSelector(a.Topics)
			bs, _ := NewSelector(b.Topics)
			if !as.Matches(got) || !bs.Matches(as.TargetName(got)) {
				t.Fatalf("%q is not selected by both mirrors", got)
			}
		})
	}
}

// TestLoopTopicBoundedWork: expressions whose product automaton is huge are given up
// on within overlapStates states rather than searched without end, and a long forced
// prefix is still found.
func TestLoopTopicBoundedWork(t *testing.T) {
	dc1, dc2 := []string{"kafka.dc1:9092"}, []string{"kafka.dc2:9092"}
	mk := func(from, to []string, include string) *config.Config {
		c := &config.Config{Source: config.Cluster{BootstrapServers: from}, Target: config.Cluster{BootstrapServers: to},
			Topics: config.Topics{Include: []string{include}}}
		c.Default()
		return c
	}
	long := strings.Repeat("a", 200)
	if got, ok := LoopTopic(mk(dc1, dc2, long+".*"), mk(dc2, dc1, `.*b`)); !ok || got != long+"b" {
		t.Fatalf("LoopTopic = %q, %v; want %q", got, ok, long+"b")
	}
	// (a|b)*a(a|b){20} against (a|b)*b(a|b){20}: overlapping, with an exponential DFA.
	hard := func(c string) string { return `[ab]*` + c + `[ab]{20}` }
	LoopTopic(mk(dc1, dc2, hard("a")+"x"), mk(dc2, dc1, hard("b")+"y")) // must return; its answer may be "no"
}
