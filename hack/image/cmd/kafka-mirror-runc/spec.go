package main

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// The subset of the OCI runtime spec (github.com/opencontainers/runtime-spec, version
// 1.0.2 as Debian's runc 1.1.5 reads it) that a pod's container needs.
type (
	ociSpec struct {
		Version  string     `json:"ociVersion"`
		Process  ociProcess `json:"process"`
		Root     ociRoot    `json:"root"`
		Hostname string     `json:"hostname"`
		Mounts   []ociMount `json:"mounts"`
		Linux    ociLinux   `json:"linux"`
	}
	ociProcess struct {
		Terminal        bool            `json:"terminal"`
		User            ociUser         `json:"user"`
		Args            []string        `json:"args"`
		Env             []string        `json:"env"`
		Cwd             string          `json:"cwd"`
		Capabilities    ociCapabilities `json:"capabilities"`
		NoNewPrivileges bool            `json:"noNewPrivileges"`
	}
	ociUser struct {
		UID            uint32   `json:"uid"`
		GID            uint32   `json:"gid"`
		AdditionalGids []uint32 `json:"additionalGids,omitempty"`
	}
	// ociCapabilities lists are empty, not omitted: an empty set is what drop: [ALL] means.
	ociCapabilities struct {
		Bounding    []string `json:"bounding"`
		Effective   []string `json:"effective"`
		Inheritable []string `json:"inheritable"`
		Permitted   []string `json:"permitted"`
		Ambient     []string `json:"ambient"`
	}
	ociRoot struct {
		Path     string `json:"path"`
		Readonly bool   `json:"readonly"`
	}
	ociMount struct {
		Destination string   `json:"destination"`
		Type        string   `json:"type"`
		Source      string   `json:"source"`
		Options     []string `json:"options,omitempty"`
	}
	ociLinux struct {
		Namespaces    []ociNamespace `json:"namespaces"`
		MaskedPaths   []string       `json:"maskedPaths"`
		ReadonlyPaths []string       `json:"readonlyPaths"`
		Seccomp       *ociSeccomp    `json:"seccomp,omitempty"`
	}
	ociNamespace struct {
		Type string `json:"type"`
	}
	ociSeccomp struct {
		DefaultAction string       `json:"defaultAction"`
		Architectures []string     `json:"architectures"`
		Syscalls      []ociSyscall `json:"syscalls"`
	}
	ociSyscall struct {
		Names    []string `json:"names"`
		Action   string   `json:"action"`
		ErrnoRet *uint    `json:"errnoRet,omitempty"`
	}
)

// The chart's securityContext (charts/kafka-mirror-operator/values.yaml): runAsUser and
// runAsGroup 65532, readOnlyRootFilesystem, allowPrivilegeEscalation false, capabilities
// drop ALL, seccompProfile RuntimeDefault.
const (
	podUID = 65532
	podGID = 65532
	// configMapMode is a ConfigMap volume's defaultMode.
	configMapMode = 0o644
)

// blockedSyscalls are the calls containerd's RuntimeDefault profile refuses to a container
// without capabilities (its allowlist, inverted, for amd64). runc has no built-in
// RuntimeDefault, and the allowlist itself is several hundred names long; this denylist
// refuses the same kernel surfaces (mounts, namespaces, modules, keyrings, tracing, BPF,
// clocks, reboot) with EPERM and lets everything else through.
var blockedSyscalls = []string{
	"acct", "add_key", "bpf", "clock_adjtime", "clock_settime", "create_module", "delete_module",
	"finit_module", "fsconfig", "fsmount", "fsopen", "fspick", "get_kernel_syms", "get_mempolicy",
	"init_module", "io_uring_enter", "io_uring_register", "io_uring_setup", "ioperm", "iopl", "kcmp",
	"kexec_file_load", "kexec_load", "keyctl", "lookup_dcookie", "mbind", "mount", "mount_setattr",
	"move_mount", "move_pages", "name_to_handle_at", "nfsservctl", "open_by_handle_at", "open_tree",
	"perf_event_open", "pivot_root", "process_vm_readv", "process_vm_writev", "ptrace",
	"query_module", "quotactl", "reboot", "request_key", "set_mempolicy", "setns", "settimeofday",
	"swapoff", "swapon", "sysfs", "_sysctl", "umount2", "unshare", "uselib", "userfaultfd", "ustat",
}

// containerSpec is the runc config for one kafka-mirror container: the image's entrypoint,
// env and working directory, the chart's securityContext, the mounts a kubelet gives every
// container (/proc, /dev, /sys read-only, /etc/hosts, /etc/resolv.conf), and volumes.
// The network namespace is the host's, so that kfake clusters on the host's loopback are
// reachable.
func containerSpec(cfg v1.Config, rootfs, hostname string, args []string, volumes []ociMount) ociSpec {
	eperm := uint(1)
	noCaps := ociCapabilities{Bounding: []string{}, Effective: []string{}, Inheritable: []string{}, Permitted: []string{}, Ambient: []string{}}
	cwd := cfg.WorkingDir
	if cwd == "" {
		cwd = "/"
	}
	s := ociSpec{
		Version: "1.0.2",
		Process: ociProcess{
			User:            ociUser{UID: podUID, GID: podGID, AdditionalGids: []uint32{podGID}},
			Args:            append(append([]string{}, cfg.Entrypoint...), args...),
			Env:             append([]string{"HOSTNAME=" + hostname}, cfg.Env...),
			Cwd:             cwd,
			Capabilities:    noCaps,
			NoNewPrivileges: true,
		},
		Root:     ociRoot{Path: rootfs, Readonly: true},
		Hostname: hostname,
		Mounts: []ociMount{
			{Destination: "/proc", Type: "proc", Source: "proc"},
			{Destination: "/dev", Type: "tmpfs", Source: "tmpfs", Options: []string{"nosuid", "strictatime", "mode=755", "size=65536k"}},
			{Destination: "/dev/pts", Type: "devpts", Source: "devpts", Options: []string{"nosuid", "noexec", "newinstance", "ptmxmode=0666", "mode=0620"}},
			{Destination: "/dev/shm", Type: "tmpfs", Source: "shm", Options: []string{"nosuid", "noexec", "nodev", "mode=1777", "size=65536k"}},
			{Destination: "/dev/mqueue", Type: "mqueue", Source: "mqueue", Options: []string{"nosuid", "noexec", "nodev"}},
			{Destination: "/sys", Type: "sysfs", Source: "sysfs", Options: []string{"nosuid", "noexec", "nodev", "ro"}},
			{Destination: "/etc/hosts", Type: "bind", Source: "/etc/hosts", Options: []string{"rbind", "ro"}},
			{Destination: "/etc/resolv.conf", Type: "bind", Source: "/etc/resolv.conf", Options: []string{"rbind", "ro"}},
		},
		Linux: ociLinux{
			Namespaces: []ociNamespace{{Type: "pid"}, {Type: "ipc"}, {Type: "uts"}, {Type: "mount"}},
			MaskedPaths: []string{"/proc/acpi", "/proc/asound", "/proc/kcore", "/proc/keys", "/proc/latency_stats",
				"/proc/timer_list", "/proc/timer_stats", "/proc/sched_debug", "/sys/firmware", "/proc/scsi"},
			ReadonlyPaths: []string{"/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys", "/proc/sysrq-trigger"},
			Seccomp: &ociSeccomp{
				DefaultAction: "SCMP_ACT_ALLOW",
				Architectures: []string{"SCMP_ARCH_X86_64", "SCMP_ARCH_X86", "SCMP_ARCH_X32"},
				Syscalls:      []ociSyscall{{Names: blockedSyscalls, Action: "SCMP_ACT_ERRNO", ErrnoRet: &eperm}},
			},
		},
	}
	s.Mounts = append(s.Mounts, volumes...)
	return s
}

// argumentFiles returns the existing absolute file paths among args (`--config /d/c.yaml`
// or `--config=/d/c.yaml`), once each, in order.
func argumentFiles(args []string) []string {
	var files []string
	for _, a := range args {
		if _, v, ok := strings.Cut(a, "="); ok && strings.HasPrefix(a, "-") {
			a = v
		}
		if !filepath.IsAbs(a) || slices.Contains(files, a) {
			continue
		}
		if fi, err := os.Stat(a); err != nil || !fi.Mode().IsRegular() {
			continue
		}
		files = append(files, a)
	}
	return files
}

// projectFiles gives the container each file named on the command line the way the
// kubelet gives a pod its ConfigMap: a read-only copy, mode 0644 (the volume's default
// mode, readable by the pod's user whatever the host file's mode), at the same path. The
// copies go under dir.
func projectFiles(args []string, dir string) ([]ociMount, error) {
	var mounts []ociMount
	for i, path := range argumentFiles(args) {
		data, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("while reading %s for the container: %w", path, err)
		}
		copyPath := filepath.Join(dir, fmt.Sprintf("%d-%s", i, filepath.Base(path)))
		if err := os.WriteFile(copyPath, data, configMapMode); err != nil {
			return nil, fmt.Errorf("while projecting %s into the container: %w", path, err)
		}
		// WriteFile's mode is filtered by the umask; the kubelet's is not.
		if err := os.Chmod(copyPath, configMapMode); err != nil {
			return nil, fmt.Errorf("while projecting %s into the container: %w", path, err)
		}
		mounts = append(mounts, ociMount{Destination: path, Type: "bind", Source: copyPath, Options: []string{"rbind", "ro"}})
	}
	return mounts, nil
}
