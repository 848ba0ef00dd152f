package controllers

import (
	"maps"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/kafka-mirror/kafka-mirror-operator/api/v1alpha1"
	"github.com/kafka-mirror/kafka-mirror-operator/mirror/config"
)

// rackEnv is the mirror container's environment variable holding its zone, set from
// the pod label spec.rack.topologyKey names; the rendered config's source.rack reads it.
const rackEnv = "KAFKA_MIRROR_RACK"

// podNameEnv is the environment variable holding the mirror pod's name, which the
// engine joins the consumer group under (consumer.groupInstanceId).
const podNameEnv = "KAFKA_MIRROR_POD_NAME"

// defaultRackTopologyKey is the zone label Kubernetes copies from the node to the pod.
const defaultRackTopologyKey = "topology.kubernetes.io/zone"

// drainGrace is added to deliveryTimeout for the pods' termination grace period: on
// SIGTERM the engine waits for its in-flight records to be acked (at most
// deliveryTimeout) and then commits, and Kubernetes must not kill it before.
const drainGrace = 30

// mirrorDeployment runs the mirror engine for m: `kafka-mirror run` from the rendered
// mirror.yaml, the referenced Secrets mounted read-only as files, probes on the
// engine's /healthz and /readyz, and a restricted security context. configHash goes on
// the pod template so that a change to the config or a referenced Secret rolls the pods.
func mirrorDeployment(m *v1alpha1.KafkaMirror, image, configHash string) *appsv1.Deployment {
	pod := &m.Spec.Pod
	if pod.Image != "" {
		image = pod.Image
	}
	podLabels := maps.Clone(pod.Labels)
	if podLabels == nil {
		podLabels = map[string]string{}
	}
	maps.Copy(podLabels, childLabels(m)) // the operator's labels win: the selector depends on them
	podAnnotations := maps.Clone(pod.Annotations)
	if podAnnotations == nil {
		podAnnotations = map[string]string{}
	}
	podAnnotations[ConfigHashAnnotation] = configHash
	podAnnotations["kubectl.kubernetes.io/default-container"] = containerName

	volumes := []corev1.Volume{
		{Name: "config", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
			LocalObjectReference: corev1.LocalObjectReference{Name: configMapName(m)},
			Items:                []corev1.KeyToPath{{Key: configKey, Path: configKey}},
		}}},
		// The root file system is read-only; the engine and Go's runtime may still want
		// a scratch directory.
		{Name: "tmp", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
	}
	mounts := []corev1.VolumeMount{
		// subPath, so that the secret directories below can be mounted next to it in
		// the image's own /etc/kafka-mirror. The pods roll on every config change, so
		// subPath's lack of live updates does not matter.
		{Name: "config", MountPath: configPath, SubPath: configKey, ReadOnly: true},
		{Name: "tmp", MountPath: "/tmp"},
	}
	for _, v := range secretVolumes(m) {
		volumes = append(volumes, corev1.Volume{Name: v.name, VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
			SecretName: v.secret,
			Items:      v.items,
			// Readable by the pod's group (fsGroup) only.
			DefaultMode: ptr.To[int32](0o440),
		}}})
		mounts = append(mounts, corev1.VolumeMount{Name: v.name, MountPath: secretsDir + "/" + v.name, ReadOnly: true})
	}
	volumes = append(volumes, pod.Volumes...)
	mounts = append(mounts, pod.VolumeMounts...)

	probe := func(path string, failures int32) *corev1.Probe {
		return &corev1.Probe{
			ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{
				Path: path, Port: intstr.FromString(metricsPortName), Scheme: corev1.URISchemeHTTP,
			}},
			PeriodSeconds:    10,
			TimeoutSeconds:   5,
			FailureThreshold: failures,
		}
	}
	grace := int64(deliveryTimeout(m).Seconds()) + drainGrace
	if pod.TerminationGracePeriodSeconds != nil {
		grace = *pod.TerminationGracePeriodSeconds
	}
	podSecurity := &corev1.PodSecurityContext{
		RunAsNonRoot:   ptr.To(true),
		RunAsUser:      ptr.To[int64](runAsUser),
		RunAsGroup:     ptr.To[int64](runAsUser),
		FSGroup:        ptr.To[int64](runAsUser),
		SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
	}
	if pod.PodSecurityContext != nil {
		podSecurity = pod.PodSecurityContext.DeepCopy()
	}
	containerSecurity := &corev1.SecurityContext{
		AllowPrivilegeEscalation: ptr.To(false),
		ReadOnlyRootFilesystem:   ptr.To(true),
		RunAsNonRoot:             ptr.To(true),
		Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
		SeccompProfile:           &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
	}
	if pod.SecurityContext != nil {
		containerSecurity = pod.SecurityContext.DeepCopy()
	}

	return &appsv1.Deployment{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
		ObjectMeta: childMeta(m, deploymentName(m)),
		Spec: appsv1.DeploymentSpec{
			Replicas:             ptr.To(desiredReplicas(m)),
			Selector:             &metav1.LabelSelector{MatchLabels: selectorLabels(m)},
			RevisionHistoryLimit: ptr.To[int32](3),
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: podLabels, Annotations: podAnnotations},
				Spec: corev1.PodSpec{
					ServiceAccountName: pod.ServiceAccountName,
					// The engine talks to Kafka only, never to the Kubernetes API.
					AutomountServiceAccountToken:  ptr.To(false),
					TerminationGracePeriodSeconds: ptr.To(grace),
					SecurityContext:               podSecurity,
					Containers: []corev1.Container{{
						Name:            containerName,
						Image:           image,
						ImagePullPolicy: pod.ImagePullPolicy,
						Args:            engineArgs(m),
						Ports: []corev1.ContainerPort{{
							Name: metricsPortName, ContainerPort: metricsPort, Protocol: corev1.ProtocolTCP,
						}},
						LivenessProbe:            probe("/healthz", 6),
						ReadinessProbe:           probe("/readyz", 3),
						Resources:                pod.Resources,
						Env:                      containerEnv(m),
						VolumeMounts:             mounts,
						SecurityContext:          containerSecurity,
						TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
					}},
					Volumes:                   volumes,
					ImagePullSecrets:          pod.ImagePullSecrets,
					NodeSelector:              pod.NodeSelector,
					Tolerations:               pod.Tolerations,
					Affinity:                  pod.Affinity,
					PriorityClassName:         pod.PriorityClassName,
					TopologySpreadConstraints: pod.TopologySpreadConstraints,
				},
			},
		},
	}
}

// engineArgs runs the engine on the rendered config, logging JSON at spec.logLevel.
func engineArgs(m *v1alpha1.KafkaMirror) []string {
	args := []string{"run", "--config", configPath, "--log-format", "json"}
	if m.Spec.LogLevel != "" {
		args = append(args, "--log-level", m.Spec.LogLevel)
	}
	return args
}

// containerEnv is the mirror container's environment: the pod's name (its static group
// membership ID) and, when spec.rack is set, the rack from the downward API, then
// spec.pod.env.
func containerEnv(m *v1alpha1.KafkaMirror) []corev1.EnvVar {
	env := []corev1.EnvVar{{Name: podNameEnv, ValueFrom: &corev1.EnvVarSource{
		FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"},
	}}}
	if m.Spec.Rack != nil {
		key := m.Spec.Rack.TopologyKey
		if key == "" {
			key = defaultRackTopologyKey
		}
		env = append(env, corev1.EnvVar{Name: rackEnv, ValueFrom: &corev1.EnvVarSource{
			FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.labels['" + key + "']"},
		}})
	}
	return append(env, m.Spec.Pod.Env...)
}

// deliveryTimeout is how long the engine of m waits for the target's acks, the longest
// part of its drain.
func deliveryTimeout(m *v1alpha1.KafkaMirror) time.Duration {
	if d := m.Spec.DeliveryTimeout; d != nil && d.Duration > 0 {
		return d.Duration
	}
	return config.DefaultDeliveryTimeout
}

// desiredReplicas is the number of mirror pods m asks for: 0 when paused, else
// spec.replicas (default 1).
// unpinUserID leaves runAsUser, runAsGroup and fsGroup to the platform: OpenShift's
// restricted-v2 SCC rejects IDs outside the namespace's range and assigns its own.
// runAsNonRoot stays, so the restricted Pod Security Standard still holds.
func unpinUserID(spec *corev1.PodSpec) {
	if sc := spec.SecurityContext; sc != nil {
		sc.RunAsUser, sc.RunAsGroup, sc.FSGroup = nil, nil, nil
	}
}

func desiredReplicas(m *v1alpha1.KafkaMirror) int32 {
	if m.Spec.Paused || m.Spec.Failover != nil {
		return 0
	}
	if m.Spec.Autoscaling != nil {
		return desiredAutoscaledReplicas(m)
	}
	if m.Spec.Replicas == nil {
		return 1
	}
	return max(*m.Spec.Replicas, 0)
}

// deploymentReady reports whether d runs its current template with all of its wanted
// replicas ready and available.
func deploymentReady(d *appsv1.Deployment, want int32) bool {
	s := d.Status
	return s.ObservedGeneration >= d.Generation &&
		s.UpdatedReplicas == want && s.ReadyReplicas == want && s.AvailableReplicas == want && s.Replicas == want
}
