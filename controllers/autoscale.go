package controllers

import (
	"context"
	"fmt"
	"math"
	"slices"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kafka-mirror/kafka-mirror-operator/api/v1alpha1"
	"github.com/kafka-mirror/kafka-mirror-operator/mirror/config"
)

// Tuning of the lag-driven autoscaler (docs/autoscaling.md).
const (
	// autoscaleTolerance is how far the recommendation may be from the current replica
	// count, as a share of it, and still count as no change (the HPA's default), so that
	// rounding a rate that just fills the current pods does not add one.
	autoscaleTolerance = 0.1
	// capacityMemory is how many drain rates measured under backlog the capacity
	// estimate keeps; the highest wins, so one interval slowed by a rebalance does not
	// shrink it.
	capacityMemory = 5
	// backlogCommitIntervals is how many offset commit intervals of drained records the
	// lag must hold at both ends of an interval for that interval to count as measured
	// under backlog: committed offsets trail the records mirrored by about one commit
	// interval, so a mirror that keeps up still shows that much lag.
	backlogCommitIntervals = 2
)

// Defaults of spec.autoscaling (the CRD defaults them too; these cover objects that
// did not go through the API server's defaulting).
const (
	defaultTargetCatchUp          = 5 * time.Minute
	defaultScaleDownStabilization = 5 * time.Minute
)

// lagSample is what one topic sync read about the mirror's consumer group, summed over
// the selected topics listed in status (the first v1alpha1.MaxTopicStatuses).
type lagSample struct {
	// at is when the offsets were read.
	at time.Time
	// end is the sum of the partitions' high watermarks; its growth is the inflow.
	end int64
	// lag is the sum of the partitions' lag; end - lag is the group's position.
	lag int64
	// partitions is how many partitions the sums cover.
	partitions int32
}

// autoscaleParams is spec.autoscaling with its defaults, and what else the decision
// depends on.
type autoscaleParams struct {
	min, max int32
	// targetCatchUp is how soon the lag should be gone.
	targetCatchUp time.Duration
	// upWindow and downWindow are the stabilisation windows.
	upWindow, downWindow time.Duration
	// streams is the number of consumer-group members per pod.
	streams int32
	// commitInterval is how often the pods commit (offsetCommitInterval).
	commitInterval time.Duration
}

// autoscaleParamsOf returns m's autoscaling parameters; m.Spec.Autoscaling must be set.
func autoscaleParamsOf(m *v1alpha1.KafkaMirror, cfg *config.Config) autoscaleParams {
	a := m.Spec.Autoscaling
	p := autoscaleParams{
		min: 1, max: a.MaxReplicas,
		targetCatchUp: defaultTargetCatchUp, downWindow: defaultScaleDownStabilization,
		streams: max(m.Spec.Streams, 1), commitInterval: config.DefaultOffsetCommitInterval,
	}
	if a.MinReplicas != nil {
		p.min = max(*a.MinReplicas, 1)
	}
	p.max = max(p.max, p.min)
	if d := a.TargetCatchUp; d != nil && d.Duration > 0 {
		p.targetCatchUp = d.Duration
	}
	if d := a.ScaleUpStabilization; d != nil && d.Duration > 0 {
		p.upWindow = d.Duration
	}
	if d := a.ScaleDownStabilization; d != nil && d.Duration >= 0 {
		p.downWindow = d.Duration
	}
	if cfg != nil {
		p.streams = max(int32(cfg.Streams), 1)
		if cfg.OffsetCommitInterval.Duration > 0 {
			p.commitInterval = cfg.OffsetCommitInterval.Duration
		}
	}
	return p
}

// observedSample is a lag sample with the Deployment as the reconcile that recorded it
// saw it.
type observedSample struct {
	lagSample
	// ready is the number of ready mirror pods.
	ready int32
	// steady is true when the Deployment had exactly the replicas it was asked for,
	// all ready and up to date: no pod starting or stopping, no rebalance under way.
	steady bool
}

// recommendation is one replica count the autoscaler recommended, and when.
type recommendation struct {
	at       time.Time
	replicas int32
}

// autoscaleState is what the autoscaler remembers about one KafkaMirror between
// reconciles. It lives in memory: after an operator restart the rates are measured
// again, and status.autoscaling.desiredReplicas keeps the replica count meanwhile.
type autoscaleState struct {
	// uid is the KafkaMirror's (see autoscaleStates).
	uid types.UID
	// prev is the last sample.
	prev *observedSample
	// capacities are the last drain rates per pod measured under backlog, oldest first.
	capacities []float64
	// lastRate is the last drain rate per pod measured with the Deployment steady;
	// haveRate tells whether there is one.
	lastRate float64
	haveRate bool
	// recs are the recommendations within the longer stabilisation window.
	recs []recommendation
	// last is the last status.autoscaling written from this state. It wins over the
	// KafkaMirror's status as read, which the cache may show before its last patch.
	last *v1alpha1.AutoscalingStatus
}

// autoscaleDecision is the outcome of one decision.
type autoscaleDecision struct {
	desired int32
	// reason is one of the v1alpha1 autoscaling reasons; message says why with numbers.
	reason, message string
	// inflow and drainPerReplica are in records per second; haveRates is false before
	// two samples.
	inflow, drainPerReplica float64
	haveRates               bool
	lag                     int64
}

// decide takes a new sample s and returns the replica count to ask for, current being
// the count asked for now. It is deterministic in its arguments and st, and works on
// sample times, never on the clock.
//
// The recommendation is ceil((inflow + lag/targetCatchUp) / capacity), where inflow is
// the growth of the high watermarks and capacity the drain rate one pod reached while
// the mirror had a backlog (the rate measured without one is only a lower bound: a pod
// that keeps up drains what arrives). It is clamped to [min, max] and to the pods the
// partitions can keep busy, then stabilised like the HPA's: up to the lowest
// recommendation of the up window, down to the highest of the down window.
func (st *autoscaleState) decide(p autoscaleParams, s observedSample, current int32) autoscaleDecision {
	prev := st.prev
	st.prev = &s
	d := autoscaleDecision{desired: current, lag: s.lag}
	if prev == nil {
		// Like the HPA, start the history with the current count, so that a scale down
		// waits a whole window after the autoscaler (or the operator) started.
		st.recs = []recommendation{{at: s.at, replicas: current}}
	}
	if prev == nil || !s.at.After(prev.at) {
		d.reason, d.message = v1alpha1.ReasonNoMeasuredRate, "waiting for a second lag sample to measure the inflow and the drain rate"
		return d
	}
	dt := s.at.Sub(prev.at).Seconds()
	d.inflow = float64(max(s.end-prev.end, 0)) / dt
	drained := float64(max((s.end-s.lag)-(prev.end-prev.lag), 0)) / dt
	if prev.steady && s.steady && prev.ready == s.ready && s.ready > 0 {
		st.lastRate, st.haveRate = drained/float64(s.ready), true
		horizon := max(dt, backlogCommitIntervals*p.commitInterval.Seconds())
		if backlog := min(prev.lag, s.lag); backlog > 0 && float64(backlog) >= drained*horizon {
			st.capacities = append(st.capacities, st.lastRate)
			if len(st.capacities) > capacityMemory {
				st.capacities = st.capacities[len(st.capacities)-capacityMemory:]
			}
		}
	}
	capacity, measured := st.capacity()
	d.drainPerReplica, d.haveRates = capacity, true

	demand := d.inflow + float64(s.lag)/p.targetCatchUp.Seconds()
	var raw int32
	switch {
	case demand == 0:
		raw = p.min
	case capacity <= 0:
		d.reason = v1alpha1.ReasonNoMeasuredRate
		d.message = fmt.Sprintf("lag %d records, inflow %.0f/s, but no drain rate measured yet (it is measured between two samples with every pod ready and none starting or stopping)", s.lag, d.inflow)
		return d
	default:
		want := demand / capacity
		raw = int32(min(math.Ceil(want), math.MaxInt32))
		if current > 0 && math.Abs(want/float64(current)-1) <= autoscaleTolerance {
			raw = current
		}
	}
	limit := p.max
	partitionLimit := int32(math.MaxInt32)
	if s.partitions > 0 {
		partitionLimit = (s.partitions + p.streams - 1) / p.streams
		limit = min(limit, partitionLimit)
	}
	var limited string
	switch {
	case raw > limit && limit == partitionLimit:
		limited = fmt.Sprintf(", limited to %d by %d partitions at %d streams per pod", limit, s.partitions, p.streams)
	case raw > limit:
		limited = fmt.Sprintf(", limited to maxReplicas %d", limit)
	}
	raw = max(min(raw, limit), p.min)

	d.desired = st.stabilize(p, s.at, raw, current)
	rate := "a lower bound, measured without a backlog"
	if measured {
		rate = "measured under backlog"
	}
	why := fmt.Sprintf("lag %d records, inflow %.0f/s, drain %.0f/s per replica (%s): %s needed to take the inflow and work off the lag within %s%s",
		s.lag, d.inflow, capacity, rate, replicasText(raw), p.targetCatchUp, limited)
	switch {
	case d.desired > current:
		d.reason, d.message = v1alpha1.ReasonScaledUp, fmt.Sprintf("scaled up from %d to %s: %s", current, replicasText(d.desired), why)
	case d.desired < current:
		d.reason, d.message = v1alpha1.ReasonScaledDown, fmt.Sprintf("scaled down from %d to %s: %s", current, replicasText(d.desired), why)
	case raw > current:
		d.reason, d.message = v1alpha1.ReasonStabilizing, fmt.Sprintf("%s; held at %d for scaleUpStabilization %s", why, current, p.upWindow)
	case raw < current:
		d.reason, d.message = v1alpha1.ReasonStabilizing, fmt.Sprintf("%s; held at %d for scaleDownStabilization %s", why, current, p.downWindow)
	default:
		d.reason, d.message = v1alpha1.ReasonSteady, why
	}
	return d
}

// replicasText is "1 replica" or "n replicas".
func replicasText(n int32) string {
	if n == 1 {
		return "1 replica"
	}
	return fmt.Sprintf("%d replicas", n)
}

// capacity is the drain rate per pod to plan with: the highest rate measured under
// backlog recently (measured true), raised to the last measured rate when that is
// higher; the last measured rate alone before any backlog was seen.
func (st *autoscaleState) capacity() (rate float64, measured bool) {
	if len(st.capacities) > 0 {
		rate, measured = slices.Max(st.capacities), true
	}
	if st.haveRate && st.lastRate > rate {
		rate = st.lastRate
	}
	return rate, measured
}

// stabilize records the recommendation raw made at now and returns the replica count
// to ask for: a scale up goes to the lowest recommendation of the up window, a scale
// down to the highest of the down window, and never past raw.
func (st *autoscaleState) stabilize(p autoscaleParams, now time.Time, raw, current int32) int32 {
	keep := max(p.upWindow, p.downWindow)
	st.recs = slices.DeleteFunc(st.recs, func(r recommendation) bool { return now.Sub(r.at) > keep })
	st.recs = append(st.recs, recommendation{at: now, replicas: raw})
	switch {
	case raw > current:
		lowest := raw
		for _, r := range st.recs {
			if now.Sub(r.at) <= p.upWindow {
				lowest = min(lowest, r.replicas)
			}
		}
		return max(lowest, current)
	case raw < current:
		highest := raw
		for _, r := range st.recs {
			if now.Sub(r.at) <= p.downWindow {
				highest = max(highest, r.replicas)
			}
		}
		return min(highest, current)
	}
	return current
}

// autoscaleStates holds the autoscaler state of every KafkaMirror, by name and checked
// against the UID: a KafkaMirror deleted and created again under the same name (with no
// reconcile in between to forget the old one) starts without the old one's decision.
// The zero value is ready to use.
type autoscaleStates struct {
	mu    sync.Mutex
	state map[types.NamespacedName]*autoscaleState
}

// mirrorRef names one KafkaMirror object: its key, and its UID.
type mirrorRef struct {
	key types.NamespacedName
	uid types.UID
}

// refOf is m's mirrorRef.
func refOf(m *v1alpha1.KafkaMirror) mirrorRef {
	return mirrorRef{key: client.ObjectKeyFromObject(m), uid: m.UID}
}

// getLocked returns ref's state, nil when there is none for this UID (a state left by
// another object of the same name is dropped).
func (a *autoscaleStates) getLocked(ref mirrorRef) *autoscaleState {
	st := a.state[ref.key]
	if st != nil && st.uid != ref.uid {
		delete(a.state, ref.key)
		return nil
	}
	return st
}

// decide runs st.decide for ref under the lock.
func (a *autoscaleStates) decide(ref mirrorRef, p autoscaleParams, s observedSample, current int32) autoscaleDecision {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.state == nil {
		a.state = map[types.NamespacedName]*autoscaleState{}
	}
	st := a.getLocked(ref)
	if st == nil {
		st = &autoscaleState{uid: ref.uid}
		a.state[ref.key] = st
	}
	return st.decide(p, s, current)
}

// seen tells whether a sample taken at at was decided on already for ref.
func (a *autoscaleStates) seen(ref mirrorRef, at time.Time) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	st := a.getLocked(ref)
	return st != nil && st.prev != nil && !at.After(st.prev.at)
}

// last returns a copy of the last status.autoscaling remembered for ref, nil when none.
func (a *autoscaleStates) last(ref mirrorRef) *v1alpha1.AutoscalingStatus {
	a.mu.Lock()
	defer a.mu.Unlock()
	if st := a.getLocked(ref); st != nil && st.last != nil {
		return st.last.DeepCopy()
	}
	return nil
}

// remember records as, the status.autoscaling of ref's latest decision.
func (a *autoscaleStates) remember(ref mirrorRef, as *v1alpha1.AutoscalingStatus) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if st := a.getLocked(ref); st != nil {
		st.last = as.DeepCopy()
	}
}

// forget drops key's state (autoscaling turned off, paused, or the KafkaMirror deleted).
func (a *autoscaleStates) forget(key types.NamespacedName) {
	a.mu.Lock()
	delete(a.state, key)
	a.mu.Unlock()
}

// desiredAutoscaledReplicas is the replica count of an autoscaled m: the last decision
// in status, or spec.replicas before the first, within [minReplicas, maxReplicas].
func desiredAutoscaledReplicas(m *v1alpha1.KafkaMirror) int32 {
	want := int32(1)
	if m.Spec.Replicas != nil {
		want = *m.Spec.Replicas
	}
	if s := m.Status.Autoscaling; s != nil && s.DesiredReplicas > 0 {
		want = s.DesiredReplicas
	}
	return clampReplicas(m, want)
}

// clampReplicas returns n within m's [minReplicas, maxReplicas].
func clampReplicas(m *v1alpha1.KafkaMirror, n int32) int32 {
	p := autoscaleParamsOf(m, nil)
	return max(min(n, p.max), p.min)
}

// withAutoscaling returns m as the children are built from it: with as, this
// reconcile's decision, as its status.autoscaling. m itself is left alone, so that its
// status stays what the API server holds until finalizeStatus patches it.
func withAutoscaling(m *v1alpha1.KafkaMirror, as *v1alpha1.AutoscalingStatus) *v1alpha1.KafkaMirror {
	if m.Spec.Autoscaling == nil || as == nil || equalAutoscaling(m.Status.Autoscaling, as) {
		return m
	}
	live := m.DeepCopy()
	live.Status.Autoscaling = as.DeepCopy()
	return live
}

func equalAutoscaling(a, b *v1alpha1.AutoscalingStatus) bool {
	return a != nil && b != nil && a.DesiredReplicas == b.DesiredReplicas
}

// autoscale is the autoscaling step: with spec.autoscaling, it decides the replica
// count from the topic sync's new lag sample (none when the sync has not produced one
// since the last decision) and returns status.autoscaling; nil without
// spec.autoscaling. spec.paused wins: nothing is decided, and the decision before the
// pause is kept for the resume.
func (r *KafkaMirrorReconciler) autoscale(ctx context.Context, m *v1alpha1.KafkaMirror, obs *observation) (*v1alpha1.AutoscalingStatus, error) {
	ref := refOf(m)
	key := ref.key
	if m.Spec.Autoscaling == nil {
		r.autoscalers.forget(key)
		return nil, nil
	}
	current := desiredAutoscaledReplicas(m)
	st := &v1alpha1.AutoscalingStatus{DesiredReplicas: current, Reason: v1alpha1.ReasonNoMeasuredRate,
		Message: "waiting for the first lag sample (read at every topic sync)"}
	if prev := m.Status.Autoscaling; prev != nil {
		st = prev.DeepCopy()
		st.DesiredReplicas = current
	}
	if last := r.autoscalers.last(ref); last != nil {
		// This operator's own last decision: newer than a status the cache may show
		// from before its patch, so a reconcile right after a scale does not undo it.
		st = last
		current = clampReplicas(m, last.DesiredReplicas)
		st.DesiredReplicas = current
	}
	if m.Spec.Paused {
		r.autoscalers.forget(key)
		st.Reason, st.Message = v1alpha1.ReasonPaused, fmt.Sprintf("spec.paused wins over autoscaling: scaled to 0; %d replicas when resumed", current)
		return st, nil
	}
	sample := obs.topics.sample
	if !obs.topicsRan || obs.topics.err != nil || sample == nil || r.autoscalers.seen(ref, sample.at) {
		return st, nil
	}
	d := &appsv1.Deployment{}
	err := r.Get(ctx, client.ObjectKey{Namespace: m.Namespace, Name: deploymentName(m)}, d)
	switch {
	case apierrors.IsNotFound(err):
		d = nil
	case err != nil:
		return nil, fmt.Errorf("while reading the mirror Deployment for autoscaling: %w", err)
	}
	s := observedSample{lagSample: *sample}
	if d != nil {
		s.ready = d.Status.ReadyReplicas
		s.steady = d.Spec.Replicas != nil && *d.Spec.Replicas == current && deploymentReady(d, current)
	}
	dec := r.autoscalers.decide(ref, autoscaleParamsOf(m, obs.config), s, current)
	st.CurrentReplicas, st.DesiredReplicas = s.ready, dec.desired
	st.Reason, st.Message, st.Lag = dec.reason, dec.message, &dec.lag
	if dec.haveRates {
		st.InflowPerSecond = ptr.To(int64(math.Round(dec.inflow)))
		st.DrainPerSecondPerReplica = ptr.To(int64(math.Round(dec.drainPerReplica)))
	}
	if dec.desired != current {
		now := metav1.NewTime(sample.at)
		st.LastScaleTime = &now
		obs.scaled = true
	}
	r.autoscalers.remember(ref, st)
	return st, nil
}

// recordScaling emits a ScaledUp or ScaledDown event, with the numbers behind it, when
// this reconcile's decision changed the autoscaled replica count.
func recordScaling(rec events.EventRecorder, m *v1alpha1.KafkaMirror, next *v1alpha1.KafkaMirrorStatus, obs *observation) {
	now := next.Autoscaling
	if !obs.scaled || now == nil {
		return
	}
	rec.Eventf(m, nil, corev1.EventTypeNormal, now.Reason, "Scale", "%s", now.Message)
}
