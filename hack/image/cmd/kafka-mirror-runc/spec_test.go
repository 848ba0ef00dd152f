package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// TestContainerSpec checks the runc config carries the chart's securityContext and the
// image's entrypoint, and mounts the config file's directory read-only.
func TestContainerSpec(t *testing.T) {
	dir := t.TempDir()
	cfgPath := filepath.Join(dir, "mirror.yaml")
	if err := os.WriteFile(cfgPath, []byte("{}"), 0o644); err != nil {
		t.Fatal(err)
	}
	img := v1.Config{Entrypoint: []string{"/usr/local/bin/kafka-mirror"}, WorkingDir: "/home/nonroot", Env: []string{"PATH=/bin"}}
	if err := os.Chmod(cfgPath, 0o600); err != nil {
		t.Fatal(err)
	}
	args := []string{"run", "--config", cfgPath, "--log-format=json"}
	bundle := t.TempDir()
	volumes, err := projectFiles(args, bundle)
	if err != nil {
		t.Fatal(err)
	}
	s := containerSpec(img, "/rootfs", "c1", args, volumes)
	raw, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	var namespaces []string
	for _, n := range s.Linux.Namespaces {
		namespaces = append(namespaces, n.Type)
	}
	blocked := s.Linux.Seccomp.Syscalls[0]
	tests := []struct {
		name string
		ok   bool
	}{
		{"runs as 65532:65532", s.Process.User.UID == 65532 && s.Process.User.GID == 65532},
		{"args are the entrypoint then ours", slices.Equal(s.Process.Args, []string{"/usr/local/bin/kafka-mirror", "run", "--config", cfgPath, "--log-format=json"})},
		{"image working dir", s.Process.Cwd == "/home/nonroot"},
		{"image env", slices.Contains(s.Process.Env, "PATH=/bin")},
		{"no new privileges", s.Process.NoNewPrivileges},
		{"read-only root", s.Root.Readonly && s.Root.Path == "/rootfs"},
		{"empty capability sets, written out", strings.Contains(string(raw), `"bounding":[]`) && strings.Contains(string(raw), `"permitted":[]`) && strings.Contains(string(raw), `"ambient":[]`)},
		{"own pid, ipc, uts, mount namespaces; host network", slices.Equal(namespaces, []string{"pid", "ipc", "uts", "mount"})},
		{"seccomp refuses mount, ptrace, unshare, bpf with EPERM", blocked.Action == "SCMP_ACT_ERRNO" && *blocked.ErrnoRet == 1 &&
			slices.Contains(blocked.Names, "mount") && slices.Contains(blocked.Names, "ptrace") && slices.Contains(blocked.Names, "unshare") && slices.Contains(blocked.Names, "bpf")},
		{"config file projected read-only at its path, as a 0644 copy", slices.ContainsFunc(s.Mounts, func(m ociMount) bool {
			fi, err := os.Stat(m.Source)
			return m.Destination == cfgPath && strings.HasPrefix(m.Source, bundle) && slices.Contains(m.Options, "ro") &&
				err == nil && fi.Mode().Perm() == 0o644
		})},
		{"sysfs read-only", slices.ContainsFunc(s.Mounts, func(m ociMount) bool { return m.Destination == "/sys" && slices.Contains(m.Options, "ro") })},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if !tc.ok {
				t.Errorf("the runc config does not hold: %s\n%s", tc.name, raw)
			}
		})
	}
}

// TestSpecMatchesChart keeps the runc config and the chart's securityContext together:
// if the chart's values change, the container make image-run starts must change too.
func TestSpecMatchesChart(t *testing.T) {
	values, err := os.ReadFile("../../../../charts/kafka-mirror-operator/values.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		`(?m)^  runAsUser: 65532$`,
		`(?m)^  runAsGroup: 65532$`,
		`(?m)^    type: RuntimeDefault$`,
		`(?m)^  allowPrivilegeEscalation: false$`,
		`(?m)^  readOnlyRootFilesystem: true$`,
		`(?m)^  capabilities:\n    drop:\n      - ALL$`,
	} {
		if !regexp.MustCompile(want).Match(values) {
			t.Errorf("the chart's values.yaml no longer matches %q: update containerSpec to the new securityContext", want)
		}
	}
}

func TestArgumentFiles(t *testing.T) {
	dir := t.TempDir()
	f := filepath.Join(dir, "c.yaml")
	if err := os.WriteFile(f, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		args []string
		want []string
	}{
		{"separate value", []string{"run", "--config", f}, []string{f}},
		{"joined value", []string{"run", "--config=" + f}, []string{f}},
		{"once per file", []string{"--a", f, "--b=" + f}, []string{f}},
		{"relative and missing paths are not projected", []string{"run", "c.yaml", filepath.Join(dir, "missing")}, nil},
		{"a directory is not projected", []string{dir}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := argumentFiles(tc.args); !slices.Equal(got, tc.want) {
				t.Errorf("argumentFiles(%q) = %q, want %q", tc.args, got, tc.want)
			}
		})
	}
}
