package controllers

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/kafka-mirror/kafka-mirror-operator/api/v1alpha1"
)

// seLinuxTypes are the SELinux types the Pod Security Standards admit.
var seLinuxTypes = map[string]bool{"": true, "container_t": true, "container_init_t": true, "container_kvm_t": true, "container_engine_t": true}

// privilegedPodProblems lists what a KafkaMirror's pod settings (spec.pod.podSecurityContext,
// securityContext, volumes) ask for beyond the "restricted" Pod Security Standard, each
// with its field path: what --refuse-privileged-pods refuses. The operator's own defaults
// meet that standard, so every problem comes from a field the KafkaMirror set.
func privilegedPodProblems(m *v1alpha1.KafkaMirror) []string {
	pod := &m.Spec.Pod
	p := field.NewPath("spec", "pod")
	var errs field.ErrorList
	refuse := func(path *field.Path, _ any, why string) {
		errs = append(errs, field.Forbidden(path, why+" (the operator refuses privileged pod settings)"))
	}
	seccomp := func(path *field.Path, s *corev1.SeccompProfile) {
		if s != nil && s.Type == corev1.SeccompProfileTypeUnconfined {
			refuse(path.Child("seccompProfile", "type"), s.Type, "Unconfined seccomp is not allowed")
		}
	}
	seLinux := func(path *field.Path, s *corev1.SELinuxOptions) {
		if s != nil && (s.User != "" || s.Role != "" || !seLinuxTypes[s.Type]) {
			refuse(path.Child("seLinuxOptions"), s, "a custom SELinux user, role or type is not allowed")
		}
	}
	appArmor := func(path *field.Path, a *corev1.AppArmorProfile) {
		if a != nil && a.Type == corev1.AppArmorProfileTypeUnconfined {
			refuse(path.Child("appArmorProfile", "type"), a.Type, "Unconfined AppArmor is not allowed")
		}
	}
	hostProcess := func(path *field.Path, w *corev1.WindowsSecurityContextOptions) {
		if w != nil && w.HostProcess != nil && *w.HostProcess {
			refuse(path.Child("windowsOptions", "hostProcess"), true, "host processes are not allowed")
		}
	}
	runAs := func(path *field.Path, user *int64, nonRoot *bool) {
		if user != nil && *user == 0 {
			refuse(path.Child("runAsUser"), 0, "running as root is not allowed")
		}
		if nonRoot != nil && !*nonRoot {
			refuse(path.Child("runAsNonRoot"), false, "must not be false")
		}
	}
	if sc := pod.PodSecurityContext; sc != nil {
		sp := p.Child("podSecurityContext")
		runAs(sp, sc.RunAsUser, sc.RunAsNonRoot)
		seccomp(sp, sc.SeccompProfile)
		seLinux(sp, sc.SELinuxOptions)
		appArmor(sp, sc.AppArmorProfile)
		hostProcess(sp, sc.WindowsOptions)
		if len(sc.Sysctls) > 0 {
			refuse(sp.Child("sysctls"), sc.Sysctls, "sysctls are not allowed")
		}
	}
	if sc := pod.SecurityContext; sc != nil {
		sp := p.Child("securityContext")
		if sc.Privileged != nil && *sc.Privileged {
			refuse(sp.Child("privileged"), true, "privileged containers are not allowed")
		}
		if sc.AllowPrivilegeEscalation != nil && *sc.AllowPrivilegeEscalation {
			refuse(sp.Child("allowPrivilegeEscalation"), true, "privilege escalation is not allowed")
		}
		if c := sc.Capabilities; c != nil {
			for i, capability := range c.Add {
				if capability != "NET_BIND_SERVICE" {
					refuse(sp.Child("capabilities", "add").Index(i), capability, "only NET_BIND_SERVICE may be added")
				}
			}
		}
		if sc.ProcMount != nil && *sc.ProcMount != corev1.DefaultProcMount {
			refuse(sp.Child("procMount"), *sc.ProcMount, "only the Default proc mount is allowed")
		}
		runAs(sp, sc.RunAsUser, sc.RunAsNonRoot)
		seccomp(sp, sc.SeccompProfile)
		seLinux(sp, sc.SELinuxOptions)
		appArmor(sp, sc.AppArmorProfile)
		hostProcess(sp, sc.WindowsOptions)
	}
	for i, v := range pod.Volumes {
		s := v.VolumeSource
		if s.ConfigMap == nil && s.CSI == nil && s.DownwardAPI == nil && s.EmptyDir == nil && s.Ephemeral == nil &&
			s.PersistentVolumeClaim == nil && s.Projected == nil && s.Secret == nil {
			refuse(p.Child("volumes").Index(i), v.Name, "only configMap, csi, downwardAPI, emptyDir, ephemeral, persistentVolumeClaim, projected and secret volumes are allowed (no hostPath)")
		}
	}
	out := make([]string, 0, len(errs))
	for _, e := range errs {
		out = append(out, e.Error())
	}
	return out
}
