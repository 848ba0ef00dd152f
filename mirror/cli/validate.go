package cli

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/util/validation/field"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"github.com/kafka-mirror/kafka-mirror-operator/mirror/config"
	"github.com/kafka-mirror/kafka-mirror-operator/mirror/handler"
	"github.com/kafka-mirror/kafka-mirror-operator/mirror/topics"
)

// ManifestRenderer renders one KafkaMirror document (YAML or JSON) into the engine
// config the operator would run for it, as controllers.RenderConfig does. It returns an
// error when the document is not a KafkaMirror the API server and the operator accept:
// an unsupported apiVersion, an unknown or mistyped field, a schema or CEL rule broken.
// Several problems come joined (errors.Join), each reported on its own line; a
// *field.Error's path keeps the operator's checks from reporting that field again. When
// the document still renders, the config comes with the error, and `validate -f` checks
// it too under the path "spec".
//
// The renderer is a hook rather than a call because rendering is the operator's code,
// and this package must not import the operator (the engine's dependencies point one way).
type ManifestRenderer func(doc []byte) (*config.Config, error)

// NewValidateCommand builds `kafka-mirror validate`: the same checks the engine and the
// operator run at start (schema, regexes, CEL expressions, named handlers and their
// args), without a cluster, so a CI job can reject a bad config before it is merged.
// KafkaMirror manifests (-f) are checked only when WithManifestRenderer is given; without
// it a KafkaMirror document is reported as a problem rather than passed unchecked.
func NewValidateCommand(opts ...Option) *cobra.Command {
	v := validator{render: newOptions(opts).render}
	var configs, manifests []string
	var output string
	cmd := &cobra.Command{
		Use:   "validate (--config FILE | -f FILE)...",
		Short: "Check a mirror config or KafkaMirror manifests without running anything",
		Long: `validate checks engine config files (kind MirrorConfig, the file 'kafka-mirror run --config'
reads) and Kubernetes manifests holding KafkaMirror resources: unknown fields, required
fields, regular expressions, CEL expressions (compiled and type-checked), named handlers
and rebalance listeners (registered, and accepting their args).

A KafkaMirror is judged as the API server would admit it (the CRD's OpenAPI schema and
its CEL rules, unknown fields rejected as by kubectl's strict field validation), then by
the operator's own checks, so a manifest that passes here is neither refused by
'kubectl apply' nor stalled by the operator. The mirrors of all files given are also
checked against each other: two that mirror the same topic names between two clusters
in both directions loop unless both set provenance.enabled (the operator stalls them),
or the two never run together: one fails back from the other (its
initialPositions.fromFailover names the other's consumerGroup, or for a KafkaMirror the
other KafkaMirror's name), or one declares spec.failover, which validate takes as
completed (the mirror stopped) and notes on the OK line.

Every problem is printed on its own line as FILE: FIELD PATH: REASON, and the command
exits non-zero. A file that passes prints one "OK: ..." line. Documents of other kinds
in a manifest file (Deployments, ConfigMaps, ...) are skipped, items of a 'kind: List'
are checked one by one, and -f DIR checks every .yaml, .yml and .json file in a
directory, so a whole GitOps directory can be checked. --output json prints one JSON
object instead, for CI annotations.`,
		Example: `  kafka-mirror validate --config mirror.yaml
  kafka-mirror validate -f config/samples/kafkamirror_v1alpha1_plain.yaml -f deploy/orders.yaml
  kafka-mirror validate -f deploy/mirrors/
  kafka-mirror validate -f deploy/mirrors/ --output json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if len(configs) == 0 && len(manifests) == 0 {
				return errors.New("give --config FILE (a MirrorConfig) or -f FILE (KafkaMirror manifests)")
			}
			switch output {
			case "text":
				return v.run(cmd.OutOrStdout(), configs, manifests)
			case "json":
				return v.runJSON(cmd.OutOrStdout(), configs, manifests)
			default:
				return fmt.Errorf("--output: Unsupported value: %q: supported values: \"text\", \"json\"", output)
			}
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "text", "text (a line per problem) or json (one object: files, problems, ok)")
	cmd.Flags().StringArrayVar(&configs, "config", nil, "a mirror config file (kind MirrorConfig); repeatable")
	cmd.Flags().StringArrayVarP(&manifests, "filename", "f", nil, "a YAML file of KafkaMirror manifests, a directory of them, or '-' for stdin; repeatable")
	return cmd
}

// validator checks files for `kafka-mirror validate`.
type validator struct {
	render ManifestRenderer // nil: KafkaMirror documents cannot be checked
}

// run checks every file, prints each problem or an OK line per file to out, and
// returns an error counting the problems when there are any.
func (v validator) run(out io.Writer, configs, manifests []string) error {
	problems := 0
	for _, f := range v.check(configs, manifests) {
		problems += report(out, f.path, f.result)
	}
	if problems > 0 {
		return fmt.Errorf("validate found %d problem(s)", problems)
	}
	return nil
}

// jsonReport is what --output json prints: every file checked, in order.
type jsonReport struct {
	// Problems counts the problems of all files; the command exits non-zero when > 0.
	Problems int        `json:"problems"`
	Files    []jsonFile `json:"files"`
}

type jsonFile struct {
	Path     string   `json:"path"`
	Problems []string `json:"problems"`
	OK       []string `json:"ok"`
}

// runJSON checks like run and prints one JSON object (jsonReport) to out.
func (v validator) runJSON(out io.Writer, configs, manifests []string) error {
	rep := jsonReport{Files: []jsonFile{}}
	for _, f := range v.check(configs, manifests) {
		rep.Problems += len(f.result.problems)
		rep.Files = append(rep.Files, jsonFile{Path: f.path, Problems: nonNil(f.result.problems), OK: nonNil(f.result.ok)})
	}
	enc := json.NewEncoder(out)
	enc.SetIndent("", "  ")
	if err := enc.Encode(rep); err != nil {
		return err
	}
	if rep.Problems > 0 {
		return fmt.Errorf("validate found %d problem(s)", rep.Problems)
	}
	return nil
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// fileResult is one checked file (or directory, when it held no mirror).
type fileResult struct {
	path   string
	result result
}

// check validates every config file and manifest path, in order.
func (v validator) check(configs, manifests []string) []fileResult {
	var out []fileResult
	for _, path := range configs {
		out = append(out, fileResult{path, validateConfigFile(path)})
	}
	for _, path := range manifests {
		out = append(out, v.validateManifestPath(path)...)
	}
	addLoopProblems(out)
	addGroupProblems(out)
	return out
}

// addLoopProblems checks the valid mirrors of all files against each other: two that
// mirror the same topic names between two clusters in both directions without
// provenance on both would pass records back and forth for ever (the operator stalls
// such a KafkaMirror with reason MirrorLoop). The second of the pair gets the problem,
// in place of its OK line.
func addLoopProblems(files []fileResult) {
	type at struct{ file, mirror int }
	var all []at
	for i := range files {
		for j := range files[i].result.mirrors {
			all = append(all, at{i, j})
		}
	}
	for n, b := range all {
		mb := &files[b.file].result.mirrors[b.mirror]
		for _, a := range all[:n] {
			ma := files[a.file].result.mirrors[a.mirror]
			t, loops := topics.LoopTopic(mb.cfg, ma.cfg)
			if !loops {
				continue
			}
			if never, note := neverMirrorTogether(*mb, ma); never {
				if note != "" {
					mb.notes = append(mb.notes, note)
				}
				continue
			}
			path := "provenance.enabled"
			if mb.kafkaMirror {
				path = "spec." + path
			}
			other := ma.name
			if a.file != b.file {
				other += " in " + files[a.file].path
			}
			r := &files[b.file].result
			r.problems = append(r.problems, fmt.Sprintf("%s (%s): %s: Required value: %s mirrors this mirror's target back into its source under the same topic names (%q), so records would loop between the two clusters; set provenance.enabled: true on both, or topics.rename on one",
				mb.label, mb.name, path, other, t))
			mb.looped = true
			break
		}
	}
	for i := range files {
		r := &files[i].result
		for _, m := range r.mirrors {
			if m.looped {
				removeOK(r, m.ok)
			} else if len(m.notes) > 0 {
				replaceOK(r, m.ok, m.ok+"; "+strings.Join(m.notes, "; "))
			}
		}
	}
}

// result is what validating one file (or one document of it) found.
type result struct {
	problems []string
	ok       []string // one summary per valid document
	found    int      // mirror documents seen, valid or not
	// mirrors are the valid documents, for the checks across documents.
	mirrors []validMirror
}

// validMirror is a document that passed, with its config.
type validMirror struct {
	label, name string // "document N" and "KafkaMirror ns/name" or "MirrorConfig"
	kafkaMirror bool
	cfg         *config.Config
	ok          string   // its OK line
	looped      bool     // addLoopProblems found it closing a loop
	notes       []string // addLoopProblems' notes for its OK line
	failbackPeer
}

func report(out io.Writer, path string, r result) int {
	for _, p := range r.problems {
		fmt.Fprintf(out, "%s: %s\n", path, p)
	}
	for _, s := range r.ok {
		fmt.Fprintf(out, "OK: %s: %s\n", path, s)
	}
	return len(r.problems)
}

func validateConfigFile(path string) result {
	data, err := os.ReadFile(path)
	if err != nil {
		return result{problems: []string{readError(err)}}
	}
	c, unknown, err := config.Decode(data)
	if err != nil {
		return result{problems: []string{err.Error()}}
	}
	c.Default()
	problems := append(fieldProblems(unknown), checkConfig(c, nil, nil)...)
	if len(problems) > 0 {
		return result{problems: problems}
	}
	ok := "MirrorConfig, " + summarize(c)
	return result{ok: []string{ok}, mirrors: []validMirror{{label: "document 0", name: "MirrorConfig", cfg: c, ok: ok, failbackPeer: configFailbackPeer(c)}}}
}

// validateManifestPath validates a manifest file, or every .yaml, .yml and .json file
// directly in a directory (as kubectl -f does). In a directory, files holding no mirror
// (a kustomization.yaml, say) are passed over; only a directory without any is a problem.
func (v validator) validateManifestPath(path string) []fileResult {
	info, err := os.Stat(path)
	if path == "-" || err != nil || !info.IsDir() {
		return []fileResult{{path, v.validateManifestFile(path)}}
	}
	entries, err := os.ReadDir(path)
	if err != nil {
		return []fileResult{{path, result{problems: []string{readError(err)}}}}
	}
	var out []fileResult
	problems, mirrors := 0, 0
	for _, e := range entries {
		ext := strings.ToLower(filepath.Ext(e.Name()))
		if e.IsDir() || (ext != ".yaml" && ext != ".yml" && ext != ".json") {
			continue
		}
		r := v.validateManifestFile(filepath.Join(path, e.Name()))
		if r.found == 0 && len(r.problems) == 1 && r.problems[0] == noMirror {
			continue
		}
		mirrors += r.found
		problems += len(r.problems)
		out = append(out, fileResult{filepath.Join(path, e.Name()), r})
	}
	if mirrors == 0 && problems == 0 {
		out = append(out, fileResult{path, result{problems: []string{noMirror}}})
	}
	return out
}

const noMirror = "no KafkaMirror or MirrorConfig found"

func (v validator) validateManifestFile(path string) result {
	var (
		data []byte
		err  error
	)
	if path == "-" {
		data, err = io.ReadAll(os.Stdin)
	} else {
		data, err = os.ReadFile(path)
	}
	if err != nil {
		return result{problems: []string{readError(err)}}
	}
	var r result
	docs := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	for i := 0; ; i++ {
		doc, err := docs.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			r.problems = append(r.problems, fmt.Sprintf("document %d: while reading YAML: %v", i, err))
			break
		}
		v.checkDocument(doc, fmt.Sprintf("document %d", i), &r)
	}
	if r.found == 0 && len(r.problems) == 0 {
		r.problems = append(r.problems, noMirror)
	}
	return r
}

// checkDocument checks one YAML or JSON document, labelled "document N" (or "document
// N item M" inside a List), adding what it found to r. Kinds other than MirrorConfig,
// KafkaMirror and List are someone else's and skipped.
func (v validator) checkDocument(doc []byte, label string, r *result) {
	var tm struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
		Metadata   struct {
			Name      string `json:"name"`
			Namespace string `json:"namespace"`
		} `json:"metadata"`
		Items []json.RawMessage `json:"items"`
		Spec  struct {
			Failover         json.RawMessage `json:"failover"`
			InitialPositions struct {
				FromFailover string `json:"fromFailover"`
			} `json:"initialPositions"`
		} `json:"spec"`
	}
	if err := yaml.Unmarshal(doc, &tm); err != nil {
		r.problems = append(r.problems, fmt.Sprintf("%s: while parsing YAML: %v", label, err))
		return
	}
	switch {
	case tm.Kind == "List" || (strings.HasSuffix(tm.Kind, "List") && tm.Items != nil):
		// kubectl's List (and typed lists such as KafkaMirrorList): each item is a document.
		for j, item := range tm.Items {
			v.checkDocument(item, fmt.Sprintf("%s item %d", label, j), r)
		}
	case tm.Kind == config.Kind:
		r.found++
		c, unknown, err := config.Decode(doc)
		if err != nil {
			r.problems = append(r.problems, fmt.Sprintf("%s: %v", label, err))
			return
		}
		c.Default()
		if ps := append(fieldProblems(unknown), checkConfig(c, nil, nil)...); len(ps) > 0 {
			r.problems = append(r.problems, prefixAll(label+" (MirrorConfig): ", ps)...)
			return
		}
		r.ok = append(r.ok, "MirrorConfig, "+summarize(c))
		r.mirrors = append(r.mirrors, validMirror{label: label, name: "MirrorConfig", cfg: c, ok: r.ok[len(r.ok)-1], failbackPeer: configFailbackPeer(c)})
	case tm.Kind == "KafkaMirror" && strings.HasPrefix(tm.APIVersion, apiGroup+"/"):
		r.found++
		name := tm.Metadata.Name
		if tm.Metadata.Namespace != "" {
			name = tm.Metadata.Namespace + "/" + name
		}
		ps, c := v.checkKafkaMirror(doc, tm.Metadata.Name)
		if len(ps) > 0 {
			r.problems = append(r.problems, prefixAll(fmt.Sprintf("%s (KafkaMirror %s): ", label, name), ps)...)
			return
		}
		r.ok = append(r.ok, fmt.Sprintf("KafkaMirror %s, %s", name, summarize(c)))
		peer := failbackPeer{failoverDeclared: len(tm.Spec.Failover) > 0 && string(tm.Spec.Failover) != "null"}
		if from := tm.Spec.InitialPositions.FromFailover; from != "" {
			peer.failsBackFrom = "KafkaMirror " + strings.TrimSuffix(name, tm.Metadata.Name) + from
		}
		r.mirrors = append(r.mirrors, validMirror{label: label, name: "KafkaMirror " + name, kafkaMirror: true, cfg: c, ok: r.ok[len(r.ok)-1], failbackPeer: peer})
	}
}

// apiGroup is the API group of both the engine config and the KafkaMirror resource; a
// document of kind KafkaMirror in another group is someone else's and is skipped.
var apiGroup, _, _ = strings.Cut(config.APIVersion, "/")

// checkKafkaMirror validates one KafkaMirror document the way the operator would: the
// spec is rendered into the engine config, whose paths equal the spec's under "spec".
func (v validator) checkKafkaMirror(doc []byte, name string) ([]string, *config.Config) {
	if v.render == nil {
		return []string{"this binary cannot check KafkaMirror manifests: its main does not pass cli.WithManifestRenderer"}, nil
	}
	c, err := v.render(doc)
	var problems []string
	var admitted field.ErrorList
	for _, e := range flatten(err) {
		problems = append(problems, e.Error())
		var fe *field.Error
		if errors.As(e, &fe) {
			admitted = append(admitted, fe)
		}
	}
	if c == nil {
		return problems, nil
	}
	if name == "" && !reportedAlready(admitted, field.Required(field.NewPath("metadata", "name"), "")) {
		problems = append(problems, field.Required(field.NewPath("metadata", "name"), "").Error())
	}
	problems = append(problems, checkConfig(c, field.NewPath("spec"), admitted)...)
	return problems, c
}

// reportedAlready tells whether the admission already reported e: at the same path, or
// the same finding in its own words (a CEL rule's message that begins with e's reason,
// reported at an enclosing path).
func reportedAlready(admitted field.ErrorList, e *field.Error) bool {
	for _, a := range admitted {
		if a.Field == e.Field || (e.Detail != "" && strings.HasPrefix(a.Detail, e.Detail)) {
			return true
		}
	}
	return false
}

// flatten lists the errors joined in err (errors.Join), or err alone.
func flatten(err error) []error {
	if err == nil {
		return nil
	}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		var out []error
		for _, e := range j.Unwrap() {
			out = append(out, flatten(e)...)
		}
		return out
	}
	return []error{err}
}

// checkConfig runs the config's own validation, then builds the handler chain and the
// rebalance listener as the engine would. A problem both report at the same path (an
// empty handler, say) is printed once, and so is one the API-server admission already
// reported (admitted; see reportedAlready).
func checkConfig(c *config.Config, root *field.Path, admitted field.ErrorList) []string {
	var problems []string
	seen := map[string]bool{}
	for _, a := range admitted {
		seen[a.Field] = true
	}
	for _, e := range c.ValidateFields(root) {
		if !seen[e.Field] && !reportedAlready(admitted, e) {
			problems = append(problems, e.Error())
		}
		seen[e.Field] = true
	}
	prefix := ""
	if root != nil {
		prefix = root.String() + "."
	}
	_, err := handler.NewChain(c.Handlers, handler.WithFieldPath(prefix+"handlers"))
	for _, fe := range handler.FieldErrors(err) {
		if !seen[fe.Field] {
			problems = append(problems, fe.Error())
		}
	}
	_, err = handler.NewListener(c.RebalanceListener, handler.WithFieldPath(prefix+"rebalanceListener"))
	for _, fe := range handler.FieldErrors(err) {
		if !seen[fe.Field] {
			problems = append(problems, fe.Error())
		}
	}
	return problems
}

// readError drops the path from a file error: every line already starts with it.
func readError(err error) string {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Op + ": " + pe.Err.Error()
	}
	return err.Error()
}

func prefixAll(prefix string, lines []string) []string {
	out := make([]string, len(lines))
	for i, l := range lines {
		out[i] = prefix + l
	}
	return out
}

// summarize says in one line what a valid config will do, so a CI log shows what was
// checked.
func summarize(c *config.Config) string {
	steps := make([]string, 0, len(c.Handlers))
	for _, h := range c.Handlers {
		switch {
		case h.CEL == nil:
			steps = append(steps, h.Name)
		case h.CEL.Filter != "" && h.CEL.Transform != nil:
			steps = append(steps, "cel filter+transform")
		case h.CEL.Filter != "":
			steps = append(steps, "cel filter")
		default:
			steps = append(steps, "cel transform")
		}
	}
	s := fmt.Sprintf("%d include pattern(s), %d exclude pattern(s), %d handler(s)",
		len(c.Topics.Include), len(c.Topics.Exclude), len(c.Handlers))
	if len(steps) > 0 {
		s += " (" + strings.Join(steps, ", ") + ")"
	}
	if l := c.RebalanceListener; l != nil {
		s += ", rebalance listener " + l.Name
	}
	return s
}

// fieldProblems renders field errors (unknown fields of a MirrorConfig) as problems.
func fieldProblems(errs field.ErrorList) []string {
	var out []string
	for _, e := range errs {
		out = append(out, e.Error())
	}
	return out
}
