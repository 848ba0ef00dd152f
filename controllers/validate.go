package controllers

import (
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/kafka-mirror/kafka-mirror-operator/api/v1alpha1"
	"github.com/kafka-mirror/kafka-mirror-operator/mirror/config"
	"github.com/kafka-mirror/kafka-mirror-operator/mirror/handler"
	"github.com/kafka-mirror/kafka-mirror-operator/mirror/topics"
)

// specError lists everything wrong with a spec, each problem starting with its field
// path (spec.topics.include[1]: ...). It is what the Stalled condition says.
type specError struct{ problems []string }

func (e *specError) Error() string { return strings.Join(e.problems, "; ") }

// validate renders m's engine config and checks it with the engine's own rules, so the
// operator accepts exactly what the engine will run: the config file's rules (regular
// expressions compile, rename is usable, durations positive, ...), then every handler
// and the rebalance listener are built (CEL compiled and type-checked, named handlers
// found in the registry, their args checked). Paths are rooted at spec. The API server
// has already rejected what its schema and CEL rules can see; this catches the rest.
//
// A mirror that runs its own image (spec.pod.image) may name handlers and listeners
// that only that image registers: those names are left to the engine, which checks them
// when it starts; everything else is still checked here.
func validate(m *v1alpha1.KafkaMirror) (*config.Config, error) {
	cfg := RenderConfig(m)
	var problems []string
	for _, e := range cfg.ValidateFields(field.NewPath("spec")) {
		problems = append(problems, e.Error())
	}
	customImage := m.Spec.Pod.Image != ""
	addHandlerProblems := func(err error) {
		for _, fe := range handler.FieldErrors(err) {
			if fe.Unregistered && customImage {
				continue
			}
			problems = append(problems, fe.Error())
		}
	}
	_, err := handler.NewChain(cfg.Handlers, handler.WithFieldPath("spec.handlers"))
	addHandlerProblems(err)
	_, err = handler.NewListener(cfg.RebalanceListener, handler.WithFieldPath("spec.rebalanceListener"))
	addHandlerProblems(err)
	problems = append(problems, PodProblems(m)...)
	if len(problems) == 0 {
		// The engine's topic selection has its own checks beyond compiling (the same
		// selector runs in the topic sync step and in the engine).
		if _, err := topics.NewSelector(cfg.Topics); err != nil {
			problems = append(problems, "spec."+err.Error())
		}
	}
	if len(problems) > 0 {
		return cfg, &specError{problems: problems}
	}
	return cfg, nil
}

// PodProblems checks the pod options the API schema cannot: user volumes and mounts
// must not take the operator's names and paths, and the grace period must leave room
// for the drain.
func PodProblems(m *v1alpha1.KafkaMirror) []string {
	pod := &m.Spec.Pod
	p := field.NewPath("spec", "pod")
	var errs field.ErrorList
	names := map[string]bool{}
	for i, v := range pod.Volumes {
		if operatorVolume(v.Name) {
			errs = append(errs, field.Invalid(p.Child("volumes").Index(i).Child("name"), v.Name,
				"config, tmp and names starting with source- or target- are the operator's volumes"))
		}
		names[v.Name] = true
	}
	for i, vm := range pod.VolumeMounts {
		fp := p.Child("volumeMounts").Index(i)
		if !names[vm.Name] {
			errs = append(errs, field.NotFound(fp.Child("name"), vm.Name))
		}
		if path := strings.TrimRight(vm.MountPath, "/"); path == "/tmp" || path == configDir || strings.HasPrefix(path, configDir+"/") {
			errs = append(errs, field.Invalid(fp.Child("mountPath"), vm.MountPath,
				"/tmp and "+configDir+" are where the operator mounts the config, Secrets and scratch space"))
		}
	}
	if g := pod.TerminationGracePeriodSeconds; g != nil && *g < int64(deliveryTimeout(m).Seconds()) {
		errs = append(errs, field.Invalid(p.Child("terminationGracePeriodSeconds"), *g,
			"must be at least deliveryTimeout ("+deliveryTimeout(m).String()+"): a stopping pod waits that long for the target's acks before it commits, and would be killed mid-drain"))
	}
	out := make([]string, 0, len(errs))
	for _, e := range errs {
		out = append(out, e.Error())
	}
	return out
}

// operatorVolume tells whether name is one the operator gives its own volumes.
func operatorVolume(name string) bool {
	return name == "config" || name == "tmp" || strings.HasPrefix(name, "source-") || strings.HasPrefix(name, "target-")
}
