package topics

import (
	"regexp"
	"regexp/syntax"
	"slices"
	"strconv"
	"strings"
)

// Bounds of commonTopic's search. Kafka topic names are at most maxTopicName
// characters of topicAlphabet; overlapStates bounds the product states explored, so an
// expression built to blow up the search costs a bounded amount of CPU.
const (
	maxTopicName  = 249
	overlapStates = 20000
)

// topicAlphabet holds the characters Kafka allows in a topic name, in the order a
// witness name prefers them (lower case first, so that names read as usual).
const topicAlphabet = "abcdefghijklmnopqrstuvwxyz0123456789.-_ABCDEFGHIJKLMNOPQRSTUVWXYZ"

// commonTopic returns the shortest topic name (first in topicAlphabet order among the
// shortest) that both selections accept, ignoring renames, and true; "" and false when
// no name is accepted by both, or when the search gave up after overlapStates states
// (expressions that complex are then tried on candidate names only). It decides the
// question exactly: both selections are regular languages (include minus exclude minus
// internal topics, over the topic alphabet), and it walks their product automaton
// breadth first.
func commonTopic(a, b selection) (string, bool) {
	var progs []*syntax.Prog
	var parts [2]selectionProgs
	for i, sel := range []selection{a, b} {
		p, err := compileSelection(sel, &progs)
		if err != nil {
			return "", false
		}
		parts[i] = p
	}
	classes := alphabetClasses(progs)

	type node struct {
		st     overlapState
		parent int
		char   byte
	}
	start := overlapState{prev: -1, pending: make([][]uint32, len(progs))}
	for i, p := range progs {
		start.pending[i] = []uint32{uint32(p.Start)}
	}
	nodes := []node{{st: start, parent: -1}}
	seen := map[string]bool{start.key(): true}
	for head := 0; head < len(nodes); head++ {
		n := nodes[head]
		if head > 0 && parts[0].accepts(n.st, progs) && parts[1].accepts(n.st, progs) {
			var name []byte
			for i := head; i > 0; i = nodes[i].parent {
				name = append(name, nodes[i].char)
			}
			slices.Reverse(name)
			return string(name), true
		}
		if n.st.depth >= maxTopicName {
			continue
		}
		for _, c := range classes {
			next := n.st.step(progs, rune(c))
			if !parts[0].alive(next) || !parts[1].alive(next) {
				continue
			}
			k := next.key()
			if seen[k] {
				continue
			}
			if len(seen) >= overlapStates {
				return "", false
			}
			seen[k] = true
			nodes = append(nodes, node{st: next, parent: head, char: c})
		}
	}
	return "", false
}

// selection is one side's topics.include and topics.exclude.
type selection struct{ include, exclude []string }

// selectionProgs are the indexes, in the shared list of programs, of one selection's
// include and exclude expressions (the internal-topic prefix among the excludes).
type selectionProgs struct {
	include, exclude []int
}

// compileSelection compiles sel's expressions (and the internal-topic prefix as one
// more exclude) onto progs, as regexp.Compile does: Perl syntax, matching whole names.
func compileSelection(sel selection, progs *[]*syntax.Prog) (selectionProgs, error) {
	var out selectionProgs
	add := func(expr string, to *[]int) error {
		re, err := syntax.Parse(expr, syntax.Perl)
		if err != nil {
			return err
		}
		p, err := syntax.Compile(re.Simplify())
		if err != nil {
			return err
		}
		*to = append(*to, len(*progs))
		*progs = append(*progs, p)
		return nil
	}
	for _, e := range sel.include {
		if err := add(e, &out.include); err != nil {
			return out, err
		}
	}
	for _, e := range sel.exclude {
		if err := add(e, &out.exclude); err != nil {
			return out, err
		}
	}
	return out, add(regexp.QuoteMeta(internalPrefix)+".*", &out.exclude)
}

// accepts tells whether the name read so far is selected: an include expression
// matches it whole, and no exclude expression does.
func (s selectionProgs) accepts(st overlapState, progs []*syntax.Prog) bool {
	matches := func(i int) bool { return st.matchesAtEnd(progs, i) }
	return slices.ContainsFunc(s.include, matches) && !slices.ContainsFunc(s.exclude, matches)
}

// alive tells whether some longer name could still be selected: an include expression
// is still running.
func (s selectionProgs) alive(st overlapState) bool {
	return slices.ContainsFunc(s.include, func(i int) bool { return len(st.pending[i]) > 0 })
}

// overlapState is where every program is after the same name: per program, the
// instructions to continue from (before their empty-width closure, which depends on
// the next character), and the name's last character (-1 before the first).
type overlapState struct {
	prev    rune
	depth   int
	pending [][]uint32
}

// key identifies the state for the search's visited set (depth is left out: a state
// reached again later accepts nothing new).
func (st overlapState) key() string {
	var b strings.Builder
	b.WriteString(strconv.Itoa(int(st.prev)))
	for _, pcs := range st.pending {
		b.WriteByte('|')
		for _, pc := range pcs {
			b.WriteString(strconv.FormatUint(uint64(pc), 36))
			b.WriteByte(',')
		}
	}
	return b.String()
}

// step returns the state after one more character c.
func (st overlapState) step(progs []*syntax.Prog, c rune) overlapState {
	next := overlapState{prev: c, depth: st.depth + 1, pending: make([][]uint32, len(progs))}
	for i, p := range progs {
		var out []uint32
		for _, pc := range closure(p, st.pending[i], st.prev, c) {
			if in := &p.Inst[pc]; isRuneInst(in.Op) && in.MatchRune(c) {
				out = append(out, in.Out)
			}
		}
		slices.Sort(out)
		next.pending[i] = slices.Compact(out)
	}
	return next
}

// matchesAtEnd tells whether program i matches the whole name read so far.
func (st overlapState) matchesAtEnd(progs []*syntax.Prog, i int) bool {
	p := progs[i]
	return slices.ContainsFunc(closure(p, st.pending[i], st.prev, -1), func(pc uint32) bool {
		return p.Inst[pc].Op == syntax.InstMatch
	})
}

// closure follows the empty transitions of p from pcs between the characters before
// and after (-1 at either end of the name), and returns the instructions reached that
// consume a character or match.
func closure(p *syntax.Prog, pcs []uint32, before, after rune) []uint32 {
	var out []uint32
	seen := map[uint32]bool{}
	stack := append([]uint32(nil), pcs...)
	for len(stack) > 0 {
		pc := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if seen[pc] {
			continue
		}
		seen[pc] = true
		in := &p.Inst[pc]
		switch in.Op {
		case syntax.InstAlt, syntax.InstAltMatch:
			stack = append(stack, in.Out, in.Arg)
		case syntax.InstCapture, syntax.InstNop:
			stack = append(stack, in.Out)
		case syntax.InstEmptyWidth:
			if in.MatchEmptyWidth(before, after) {
				stack = append(stack, in.Out)
			}
		case syntax.InstMatch:
			out = append(out, pc)
		case syntax.InstFail:
		default:
			out = append(out, pc)
		}
	}
	return out
}

func isRuneInst(op syntax.InstOp) bool {
	switch op {
	case syntax.InstRune, syntax.InstRune1, syntax.InstRuneAny, syntax.InstRuneAnyNotNL:
		return true
	}
	return false
}

// alphabetClasses splits topicAlphabet into classes of characters that no instruction
// of progs tells apart (nor a word boundary), and returns each class's first
// character: the search need try only those.
func alphabetClasses(progs []*syntax.Prog) []byte {
	var out []byte
	seen := map[string]bool{}
	for i := 0; i < len(topicAlphabet); i++ {
		c := rune(topicAlphabet[i])
		var sig strings.Builder
		if syntax.IsWordChar(c) {
			sig.WriteByte('w')
		}
		for _, p := range progs {
			for j := range p.Inst {
				if in := &p.Inst[j]; isRuneInst(in.Op) {
					if in.MatchRune(c) {
						sig.WriteByte('1')
					} else {
						sig.WriteByte('0')
					}
				}
			}
			sig.WriteByte('|')
		}
		if k := sig.String(); !seen[k] {
			seen[k] = true
			out = append(out, topicAlphabet[i])
		}
	}
	return out
}
