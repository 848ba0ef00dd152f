package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"github.com/kafka-mirror/kafka-mirror-operator/mirror/config"
)

// The README is part of the product: these tests keep its commands, links and
// configuration reference true to the code, so that it cannot rot.

const readmePath = "README.md"

func readREADME(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(readmePath)
	if err != nil {
		t.Fatalf("reading the README: %v", err)
	}
	return string(b)
}

// commandLines returns the lines of the README's shell code blocks, without prompts and
// comments, with backslash continuations joined.
func commandLines(readme string) []string {
	var lines []string
	inShell := false
	var pending string
	sc := bufio.NewScanner(strings.NewReader(readme))
	for sc.Scan() {
		l := sc.Text()
		trimmed := strings.TrimSpace(l)
		if strings.HasPrefix(trimmed, "```") {
			lang := strings.TrimPrefix(trimmed, "```")
			inShell = !inShell && (lang == "sh" || lang == "shell" || lang == "bash" || lang == "console")
			continue
		}
		if !inShell {
			continue
		}
		trimmed = strings.TrimPrefix(trimmed, "$ ")
		if i := strings.Index(trimmed, " #"); i >= 0 {
			trimmed = strings.TrimSpace(trimmed[:i])
		}
		if trimmed == "" || strings.HasPrefix(trimmed, "#") {
			continue
		}
		if strings.HasSuffix(trimmed, "\\") {
			pending += strings.TrimSuffix(trimmed, "\\") + " "
			continue
		}
		lines = append(lines, pending+trimmed)
		pending = ""
	}
	return lines
}

// makeTargets lists the targets the Makefile defines.
func makeTargets(t *testing.T) map[string]bool {
	t.Helper()
	b, err := os.ReadFile("Makefile")
	if err != nil {
		t.Fatalf("reading the Makefile: %v", err)
	}
	targets := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^([a-zA-Z0-9_.-]+):`).FindAllStringSubmatch(string(b), -1) {
		targets[m[1]] = true
	}
	return targets
}

// TestREADMECommandsExist checks every `make X` in the README against the Makefile and
// every `kafka-mirror ...` against the CLI: the subcommand exists and accepts the flags.
func TestREADMECommandsExist(t *testing.T) {
	readme := readREADME(t)
	targets := makeTargets(t)
	var makes, cli, ran int
	for _, line := range commandLines(readme) {
		for _, part := range strings.Split(line, "&&") {
			fields := strings.Fields(strings.TrimSpace(part))
			if len(fields) == 0 {
				continue
			}
			switch fields[0] {
			case "make":
				makes++
				for _, arg := range fields[1:] {
					if strings.Contains(arg, "=") || strings.HasPrefix(arg, "-") {
						continue // a variable such as DEMO_ARGS=... or a make flag
					}
					if !targets[arg] {
						t.Errorf("README runs `%s`, but the Makefile has no target %q", strings.TrimSpace(part), arg)
					}
				}
			case "kafka-mirror", "bin/kafka-mirror", "./bin/kafka-mirror":
				cli++
				checkCLI(t, strings.TrimSpace(part), fields[1:])
				if runREADMECommand(t, strings.TrimSpace(part), fields[1:]) {
					ran++
				}
			case "go":
				if len(fields) > 2 && fields[1] == "run" && fields[2] == "." {
					cli++
					checkCLI(t, strings.TrimSpace(part), fields[3:])
				}
			}
		}
	}
	if ran == 0 {
		t.Errorf("ran no README command; it shows `kafka-mirror validate --config examples/mirror.yaml`")
	}
	if makes < 2 || cli < 3 {
		t.Errorf("found %d make and %d kafka-mirror commands in the README; the quick start alone has more", makes, cli)
	}
}

// runREADMECommand runs the README's quick, side-effect-free commands (validate and
// version) on the files of this repository and requires them to succeed. A command that
// names a file of the reader's own (mirror.yaml) is only parsed. It reports whether it ran.
func runREADMECommand(t *testing.T, line string, args []string) bool {
	t.Helper()
	if len(args) == 0 || (args[0] != "validate" && args[0] != "version") {
		return false
	}
	for _, a := range args[1:] {
		if !strings.HasPrefix(a, "-") {
			if _, err := os.Stat(a); err != nil {
				return false
			}
		}
	}
	var out bytes.Buffer
	root := newRootCommand()
	root.SetOut(&out)
	root.SetErr(&out)
	root.SetArgs(args)
	if err := root.Execute(); err != nil {
		t.Errorf("README command `%s` failed: %v\n%s", line, err, out.String())
	}
	return true
}

func checkCLI(t *testing.T, line string, args []string) {
	t.Helper()
	root := newRootCommand()
	cmd, rest, err := root.Find(args)
	if err != nil {
		t.Errorf("README runs `%s`: %v", line, err)
		return
	}
	if cmd == root && len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		t.Errorf("README runs `%s`, but %q is not a kafka-mirror subcommand", line, args[0])
		return
	}
	if cmd.Hidden {
		t.Errorf("README runs `%s`, but %q is still a hidden placeholder", line, cmd.Name())
	}
	if err := cmd.ParseFlags(rest); err != nil {
		t.Errorf("README runs `%s`: %v", line, err)
	}
}

// TestREADMELinksExist checks that every relative link and every repository path a
// README command uses exists.
func TestREADMELinksExist(t *testing.T) {
	readme := readREADME(t)
	for _, m := range regexp.MustCompile(`\]\(([^)#\s]+)(#[^)]*)?\)`).FindAllStringSubmatch(readme, -1) {
		target := m[1]
		if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
			continue
		}
		if _, err := os.Stat(target); err != nil {
			t.Errorf("README links to %s, which does not exist", target)
		}
	}
	pathLike := regexp.MustCompile(`^(charts|config|examples|docs|hack|test)/[A-Za-z0-9_./-]+$`)
	for _, line := range commandLines(readme) {
		for _, f := range strings.Fields(line) {
			f = strings.TrimPrefix(f, "--config=")
			if !pathLike.MatchString(f) {
				continue
			}
			if _, err := os.Stat(f); err != nil {
				t.Errorf("README command `%s` uses %s, which does not exist", line, f)
			}
		}
	}
}

// Markers around the generated configuration reference in the README.
const (
	configRefStart = "<!-- config-reference:start (generated from mirror/config by TestREADMEConfigReference; UPDATE_README=1 go test -run TestREADMEConfigReference . rewrites it) -->"
	configRefEnd   = "<!-- config-reference:end -->"
)

// TestREADMEConfigReference checks that the README's configuration reference is the
// one generated from mirror/config: every field of the file, its type, its doc comment
// and its default as Config.Default sets it. UPDATE_README=1 rewrites the section.
func TestREADMEConfigReference(t *testing.T) {
	want := configReference(t)
	readme := readREADME(t)
	start := strings.Index(readme, configRefStart)
	end := strings.Index(readme, configRefEnd)
	if start < 0 || end < start {
		t.Fatalf("the README has no configuration reference between %q and %q", configRefStart, configRefEnd)
	}
	got := readme[start+len(configRefStart) : end]
	if got == want {
		return
	}
	if os.Getenv("UPDATE_README") == "1" {
		updated := readme[:start+len(configRefStart)] + want + readme[end:]
		if err := os.WriteFile(readmePath, []byte(updated), 0o644); err != nil {
			t.Fatalf("rewriting the README: %v", err)
		}
		t.Logf("rewrote the configuration reference in %s", readmePath)
		return
	}
	t.Errorf("the README's configuration reference is out of date with mirror/config; run\n  UPDATE_README=1 go test -run TestREADMEConfigReference .\nwant:\n%s", want)
}

// configField is one row of the reference.
type configField struct {
	path, typ, doc, def string
}

// configReference renders the reference table from the source of mirror/config (for
// the doc comments) and from config.Config itself (for the types and defaults).
func configReference(t *testing.T) string {
	t.Helper()
	docs := structDocs(t, "mirror/config/types.go")
	defaults := defaultValues()
	var rows []configField
	var walk func(typ reflect.Type, prefix string)
	walk = func(typ reflect.Type, prefix string) {
		for i := 0; i < typ.NumField(); i++ {
			f := typ.Field(i)
			name := strings.Split(f.Tag.Get("json"), ",")[0]
			if name == "" || name == "-" {
				continue
			}
			path := prefix + name
			ft := f.Type
			for ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			row := configField{path: path, typ: typeName(ft), doc: fieldDoc(docs[typ.Name()+"."+f.Name], f.Name, jsonNames(typ)), def: defaults[path]}
			rows = append(rows, row)
			switch {
			case ft.Kind() == reflect.Struct && ft != reflect.TypeOf(config.Duration{}):
				walk(ft, path+".")
			case ft.Kind() == reflect.Slice && ft.Elem().Kind() == reflect.Struct:
				walk(ft.Elem(), path+"[].")
			}
		}
	}
	walk(reflect.TypeOf(config.Config{}), "")
	var b strings.Builder
	b.WriteString("\n| Field | Type | Default | Description |\n|---|---|---|---|\n")
	for _, r := range rows {
		def := r.def
		if def != "" {
			def = "`" + def + "`"
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s |\n", r.path, r.typ, def, strings.ReplaceAll(r.doc, "|", "\\|"))
	}
	return b.String()
}

func typeName(t reflect.Type) string {
	switch {
	case t == reflect.TypeOf(config.Duration{}):
		return "duration"
	case t.Kind() == reflect.Struct:
		return "object"
	case t.Kind() == reflect.Slice && t.Elem().Kind() == reflect.Struct:
		return "list of objects"
	case t.Kind() == reflect.Slice:
		return "list of " + t.Elem().Kind().String()
	case t.Kind() == reflect.Map:
		return "map of " + t.Elem().Kind().String()
	default:
		return t.Kind().String()
	}
}

// structDocs reads the doc comment of every struct field in file, keyed "Type.Field".
func structDocs(t *testing.T, file string) map[string]string {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), file, nil, parser.ParseComments)
	if err != nil {
		t.Fatalf("parsing %s: %v", file, err)
	}
	docs := map[string]string{}
	ast.Inspect(f, func(n ast.Node) bool {
		ts, ok := n.(*ast.TypeSpec)
		if !ok {
			return true
		}
		st, ok := ts.Type.(*ast.StructType)
		if !ok {
			return false
		}
		for _, fld := range st.Fields.List {
			for _, name := range fld.Names {
				docs[ts.Name.Name+"."+name.Name] = strings.Join(strings.Fields(fld.Doc.Text()), " ")
			}
		}
		return false
	})
	return docs
}

// fieldDoc turns a Go doc comment into a reference entry: "BootstrapServers lists
// host:port ..." becomes "Lists host:port ...", "Source is the cluster ..." becomes "The
// cluster ...", and sibling fields named in the text get their YAML names.
func fieldDoc(doc, goName string, siblings map[string]string) string {
	rest, ok := strings.CutPrefix(doc, goName+" ")
	if !ok || rest == "" {
		return doc
	}
	for _, verb := range []string{"is ", "are "} {
		if r, ok := strings.CutPrefix(rest, verb); ok {
			rest = r
			break
		}
	}
	words := strings.Fields(strings.ToUpper(rest[:1]) + rest[1:])
	for i, w := range words {
		core := strings.TrimRight(w, ".,;:)")
		if name, ok := siblings[core]; ok && core != goName {
			words[i] = "`" + name + "`" + w[len(core):]
		}
	}
	return strings.Join(words, " ")
}

// jsonNames maps the Go field names of a struct to their YAML (JSON) names.
func jsonNames(t reflect.Type) map[string]string {
	out := map[string]string{}
	for i := 0; i < t.NumField(); i++ {
		if name := strings.Split(t.Field(i).Tag.Get("json"), ",")[0]; name != "" && name != "-" {
			out[t.Field(i).Name] = name
		}
	}
	return out
}

// defaultValues runs Config.Default on a config whose optional parts are present but
// empty and returns, by field path, every value Default filled in.
func defaultValues() map[string]string {
	c := config.Config{
		Source:            config.Cluster{TLS: &config.TLS{}, SASL: &config.SASL{}},
		Target:            config.Cluster{TLS: &config.TLS{}, SASL: &config.SASL{}},
		Topics:            config.Topics{Rename: &config.Rename{}},
		Handlers:          []config.HandlerSpec{{CEL: &config.CELHandler{Transform: &config.CELTransform{}}}},
		RebalanceListener: &config.PluginSpec{},
		Groups:            &config.Groups{},
	}
	c.Default()
	out := map[string]string{}
	var walk func(v reflect.Value, prefix string)
	walk = func(v reflect.Value, prefix string) {
		t := v.Type()
		for i := 0; i < t.NumField(); i++ {
			name := strings.Split(t.Field(i).Tag.Get("json"), ",")[0]
			if name == "" || name == "-" {
				continue
			}
			fv := v.Field(i)
			path := prefix + name
			for fv.Kind() == reflect.Pointer {
				if fv.IsNil() {
					break
				}
				fv = fv.Elem()
			}
			switch {
			case fv.Kind() == reflect.Pointer || fv.IsZero():
			case fv.Type() == reflect.TypeOf(config.Duration{}):
				// 2m0s reads as 2m, as a user writes it.
				d := fv.Interface().(config.Duration).Duration.String()
				if strings.HasSuffix(d, "m0s") {
					d = strings.TrimSuffix(d, "0s")
				}
				if strings.HasSuffix(d, "h0m") {
					d = strings.TrimSuffix(d, "0m")
				}
				out[path] = d
			case fv.Kind() == reflect.Struct:
				walk(fv, path+".")
			case fv.Kind() == reflect.Slice && fv.Type().Elem().Kind() == reflect.Struct:
				walk(fv.Index(0), path+"[].")
			case fv.Kind() == reflect.Slice || fv.Kind() == reflect.Map:
			default:
				out[path] = fmt.Sprint(fv.Interface())
			}
		}
	}
	// apiVersion and kind are identifiers rather than defaults, but Default fills them
	// in, and the table then shows their only valid values.
	walk(reflect.ValueOf(c), "")
	return out
}

// TestREADMEGoExamplesBuild compiles every Go program in the README against this
// module, so that an API change that breaks an example fails here.
func TestREADMEGoExamplesBuild(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the README's Go programs with the go command")
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go command is needed to build the README's examples: %v", err)
	}
	repo, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	blocks := regexp.MustCompile("(?s)```go\n(.*?)```").FindAllStringSubmatch(readREADME(t), -1)
	if len(blocks) == 0 {
		t.Fatal("the README has no Go example")
	}
	for i, b := range blocks {
		if !strings.HasPrefix(b[1], "package main") {
			continue
		}
		// The program is placed in the module through an overlay, so it builds against
		// this checkout without writing into it.
		dir := t.TempDir()
		src := filepath.Join(dir, "main.go")
		if err := os.WriteFile(src, []byte(b[1]), 0o600); err != nil {
			t.Fatal(err)
		}
		pkg := fmt.Sprintf("zz_readme_example_%d", i)
		overlay, _ := json.Marshal(map[string]map[string]string{"Replace": {filepath.Join(repo, pkg, "main.go"): src}})
		overlayPath := filepath.Join(dir, "overlay.json")
		if err := os.WriteFile(overlayPath, overlay, 0o600); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(goBin, "build", "-overlay", overlayPath, "-o", os.DevNull, "./"+pkg)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("the README's Go example #%d does not build: %v\n%s", i+1, err, out)
		}
	}
}

// TestREADMEYAMLExamplesValidate runs every YAML example of the README through
// `kafka-mirror validate`: MirrorConfig files and KafkaMirror manifests as they are, and
// a bare `handlers:` list inside a minimal MirrorConfig.
func TestREADMEYAMLExamplesValidate(t *testing.T) {
	blocks := regexp.MustCompile("(?s)```yaml\n(.*?)```").FindAllStringSubmatch(readREADME(t), -1)
	checked := 0
	for i, b := range blocks {
		doc := b[1]
		var flag string
		switch {
		case strings.Contains(doc, "kind: MirrorConfig"):
			flag = "--config"
		case strings.Contains(doc, "kind: KafkaMirror"):
			flag = "-f"
		case strings.HasPrefix(doc, "handlers:"):
			flag = "--config"
			doc = "apiVersion: kafkamirror.io/v1alpha1\nkind: MirrorConfig\nsource: {bootstrapServers: [\"a:9092\"]}\n" +
				"target: {bootstrapServers: [\"b:9092\"]}\nconsumerGroup: g\ntopics: {include: [\"t\"]}\n" + doc
		default:
			continue
		}
		checked++
		path := filepath.Join(t.TempDir(), fmt.Sprintf("example-%d.yaml", i+1))
		if err := os.WriteFile(path, []byte(doc), 0o600); err != nil {
			t.Fatal(err)
		}
		var out bytes.Buffer
		root := newRootCommand()
		root.SetOut(&out)
		root.SetErr(&out)
		root.SetArgs([]string{"validate", flag, path})
		if err := root.Execute(); err != nil {
			t.Errorf("the README's YAML example #%d does not validate: %v\n%s\n%s", i+1, err, out.String(), doc)
		}
	}
	if checked < 3 {
		t.Errorf("validated %d YAML examples; the README has a MirrorConfig, a KafkaMirror and a handler chain", checked)
	}
}

// TestREADMEListsMakeTargets checks that the README's Develop table lists every target
// `make help` shows, so a new target is documented where newcomers look.
func TestREADMEListsMakeTargets(t *testing.T) {
	mk, err := os.ReadFile("Makefile")
	if err != nil {
		t.Fatalf("reading the Makefile: %v", err)
	}
	readme := readREADME(t)
	for _, m := range regexp.MustCompile(`(?m)^([a-zA-Z0-9_-]+):.*?## `).FindAllStringSubmatch(string(mk), -1) {
		target := m[1]
		if target == "help" {
			continue
		}
		if !strings.Contains(readme, "| `make "+target+"` |") {
			t.Errorf("`make help` lists %q, but the README's Develop table does not", target)
		}
	}
}

// TestREADMEMetricsMatchTheEngine checks that the README's metrics table lists exactly
// the kafka_mirror_* metrics the engine defines.
func TestREADMEMetricsMatchTheEngine(t *testing.T) {
	name := regexp.MustCompile(`kafka_mirror_[a-z_]+`)
	inCode := map[string]bool{}
	// The group checkpoint metrics are defined next to the checkpoints.
	for _, file := range []string{"mirror/metrics.go", "mirror/checkpoint.go"} {
		src, err := os.ReadFile(file)
		if err != nil {
			t.Fatalf("reading the engine's metrics: %v", err)
		}
		for _, n := range name.FindAllString(string(src), -1) {
			inCode[n] = true
		}
	}
	inREADME := map[string]bool{}
	for _, m := range regexp.MustCompile("(?m)^\\| `(kafka_mirror_[a-z_]+)` \\|").FindAllStringSubmatch(readREADME(t), -1) {
		inREADME[m[1]] = true
	}
	for n := range inCode {
		if !inREADME[n] {
			t.Errorf("the engine defines %s, but the README's metrics table does not list it", n)
		}
	}
	for n := range inREADME {
		if !inCode[n] {
			t.Errorf("the README lists %s, which mirror/metrics.go does not define", n)
		}
	}
	if len(inCode) < 10 {
		t.Errorf("found only %d metric names in mirror/metrics.go; has the file moved?", len(inCode))
	}
}
