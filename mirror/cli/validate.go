package cli

import (
	"bufio"
	"bytes"
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
)

// ManifestRenderer renders one KafkaMirror document (YAML or JSON) into the engine
// config the operator would run for it, as controllers.RenderConfig does. It returns an
// error when the document is not a KafkaMirror the operator accepts: an unsupported
// apiVersion, an unknown or mistyped field. `validate -f` then checks the rendered config
// under the path "spec".
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
	cmd := &cobra.Command{
		Use:   "validate (--config FILE | -f FILE)...",
		Short: "Check a mirror config or KafkaMirror manifests without running anything",
		Long: `validate checks engine config files (kind MirrorConfig, the file 'kafka-mirror run --config'
reads) and Kubernetes manifests holding KafkaMirror resources: unknown fields, required
fields, regular expressions, CEL expressions (compiled and type-checked), named handlers
and rebalance listeners (registered, and accepting their args).

Every problem is printed on its own line as FILE: FIELD PATH: REASON, and the command
exits non-zero. A file that passes prints one "OK: ..." line. Documents of other kinds
in a manifest file (Deployments, ConfigMaps, ...) are skipped, and -f DIR checks every
.yaml, .yml and .json file in a directory, so a whole GitOps directory can be checked.`,
		Example: `  kafka-mirror validate --config mirror.yaml
  kafka-mirror validate -f config/samples/kafkamirror.yaml -f deploy/orders.yaml
  kafka-mirror validate -f deploy/mirrors/`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if len(configs) == 0 && len(manifests) == 0 {
				return errors.New("give --config FILE (a MirrorConfig) or -f FILE (KafkaMirror manifests)")
			}
			return v.run(cmd.OutOrStdout(), configs, manifests)
		},
	}
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
	for _, path := range configs {
		problems += report(out, path, validateConfigFile(path))
	}
	for _, path := range manifests {
		problems += v.validateManifestPath(out, path)
	}
	if problems > 0 {
		return fmt.Errorf("validate found %d problem(s)", problems)
	}
	return nil
}

// result is what validating one file (or one document of it) found.
type result struct {
	problems []string
	ok       []string // one summary per valid document
	found    int      // mirror documents seen, valid or not
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
	var c config.Config
	if err := yaml.UnmarshalStrict(data, &c); err != nil {
		return result{problems: []string{fmt.Sprintf("while parsing the mirror config: %v", err)}}
	}
	c.Default()
	problems := checkConfig(&c, nil)
	if len(problems) > 0 {
		return result{problems: problems}
	}
	return result{ok: []string{"MirrorConfig, " + summarize(&c)}}
}

// validateManifestPath validates a manifest file, or every .yaml, .yml and .json file
// directly in a directory (as kubectl -f does). In a directory, files holding no mirror
// (a kustomization.yaml, say) are passed over; only a directory without any is a problem.
func (v validator) validateManifestPath(out io.Writer, path string) int {
	info, err := os.Stat(path)
	if path == "-" || err != nil || !info.IsDir() {
		return report(out, path, v.validateManifestFile(path))
	}
	entries, err := os.ReadDir(path)
	if err != nil {
		return report(out, path, result{problems: []string{readError(err)}})
	}
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
		problems += report(out, filepath.Join(path, e.Name()), r)
	}
	if mirrors == 0 && problems == 0 {
		problems += report(out, path, result{problems: []string{noMirror}})
	}
	return problems
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
	found := 0
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
		var tm struct {
			APIVersion string `json:"apiVersion"`
			Kind       string `json:"kind"`
			Metadata   struct {
				Name      string `json:"name"`
				Namespace string `json:"namespace"`
			} `json:"metadata"`
		}
		if err := yaml.Unmarshal(doc, &tm); err != nil {
			r.problems = append(r.problems, fmt.Sprintf("document %d: while parsing YAML: %v", i, err))
			continue
		}
		switch {
		case tm.Kind == config.Kind:
			found++
			var c config.Config
			if err := yaml.UnmarshalStrict(doc, &c); err != nil {
				r.problems = append(r.problems, fmt.Sprintf("document %d: while parsing the mirror config: %v", i, err))
				continue
			}
			c.Default()
			if ps := checkConfig(&c, nil); len(ps) > 0 {
				r.problems = append(r.problems, prefixAll(fmt.Sprintf("document %d (MirrorConfig): ", i), ps)...)
				continue
			}
			r.ok = append(r.ok, "MirrorConfig, "+summarize(&c))
		case tm.Kind == "KafkaMirror" && strings.HasPrefix(tm.APIVersion, apiGroup+"/"):
			found++
			name := tm.Metadata.Name
			if tm.Metadata.Namespace != "" {
				name = tm.Metadata.Namespace + "/" + name
			}
			ps, c := v.checkKafkaMirror(doc, tm.Metadata.Name)
			if len(ps) > 0 {
				r.problems = append(r.problems, prefixAll(fmt.Sprintf("document %d (KafkaMirror %s): ", i, name), ps)...)
				continue
			}
			r.ok = append(r.ok, fmt.Sprintf("KafkaMirror %s, %s", name, summarize(c)))
		}
	}
	if found == 0 && len(r.problems) == 0 {
		r.problems = append(r.problems, noMirror)
	}
	r.found = found
	return r
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
	if err != nil {
		return []string{err.Error()}, nil
	}
	var problems []string
	if name == "" {
		problems = append(problems, field.Required(field.NewPath("metadata", "name"), "").Error())
	}
	problems = append(problems, checkConfig(c, field.NewPath("spec"))...)
	return problems, c
}

// checkConfig runs the config's own validation, then builds the handler chain and the
// rebalance listener as the engine would. A problem both report at the same path (an
// empty handler, say) is printed once.
func checkConfig(c *config.Config, root *field.Path) []string {
	var problems []string
	seen := map[string]bool{}
	for _, e := range c.ValidateFields(root) {
		problems = append(problems, e.Error())
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
