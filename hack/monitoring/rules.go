package main

import (
	"fmt"

	"sigs.k8s.io/yaml"
)

// alert is one Prometheus alerting rule, with the text docs/metrics.md shows for it.
type alert struct {
	Alert       string            `json:"alert"`
	Expr        string            `json:"expr"`
	For         string            `json:"for,omitempty"`
	Labels      map[string]string `json:"labels"`
	Annotations map[string]string `json:"annotations"`
}

// ruleGroup is a group of rules in a PrometheusRule (or a Prometheus rule file).
type ruleGroup struct {
	Name  string  `json:"name"`
	Rules []alert `json:"rules"`
}

// Severities: critical pages (records are not moving at all), warning waits for working hours.
const (
	severityWarning  = "warning"
	severityCritical = "critical"
	ruleGroupName    = "kafka-mirror"
)

const mirrorRef = `{{ $labels.namespace }}/{{ $labels.app_kubernetes_io_instance }}`

func annotations(summary, description, runbook string) map[string]string {
	return map[string]string{
		"summary":     summary,
		"description": description,
		"runbook_url": "https://github.com/kafka-mirror/kafka-mirror-operator/blob/main/docs/metrics.md#" + runbook,
	}
}

// alerts are the rules of the PrometheusRule. The thresholds are starting points;
// docs/metrics.md says how to tune them.
var alerts = []alert{
	{
		Alert:  "KafkaMirrorLagHigh",
		Expr:   `sum by (namespace, app_kubernetes_io_instance, topic) (kafka_mirror_lag_records) > 100000`,
		For:    "15m",
		Labels: map[string]string{"severity": severityWarning},
		Annotations: annotations(
			"KafkaMirror "+mirrorRef+" lags {{ $value | humanize }} records on {{ $labels.topic }}",
			"More than 100k source records of the topic are not yet committed as mirrored, for 15 minutes. Check kafka_mirror_send_errors_total, the target's health and the mirror pods' CPU; scale with kubectl scale kafkamirror/{{ $labels.app_kubernetes_io_instance }} --replicas=N if partitions allow.",
			"kafkamirrorlaghigh"),
	},
	{
		Alert: "KafkaMirrorLagGrowing",
		Expr: `sum by (namespace, app_kubernetes_io_instance, topic) (deriv(kafka_mirror_lag_records[30m])) > 0
  and sum by (namespace, app_kubernetes_io_instance, topic) (kafka_mirror_lag_records) > 1000`,
		For:    "30m",
		Labels: map[string]string{"severity": severityWarning},
		Annotations: annotations(
			"KafkaMirror "+mirrorRef+" falls further behind on {{ $labels.topic }}",
			"The lag has grown for 30 minutes and is above 1000 records: the mirror is slower than the producers. Add streams or replicas, or check the target's produce latency.",
			"kafkamirrorlaggrowing"),
	},
	{
		Alert: "KafkaMirrorNotCommitting",
		Expr: `sum by (namespace, app_kubernetes_io_instance) (kafka_mirror_inflight_records) > 0
  and sum by (namespace, app_kubernetes_io_instance) (increase(kafka_mirror_commits_total[10m])) == 0`,
		For:    "5m",
		Labels: map[string]string{"severity": severityCritical},
		Annotations: annotations(
			"KafkaMirror "+mirrorRef+" has committed nothing for 10 minutes",
			"Records are in flight but the source group coordinator confirmed no commit for 10 minutes: the target does not acknowledge, or the source coordinator is unreachable. Check the mirror pods' logs for produce and commit errors.",
			"kafkamirrornotcommitting"),
	},
	{
		Alert:  "KafkaMirrorWaitingForTarget",
		Expr:   `max by (namespace, app_kubernetes_io_instance, topic) (kafka_mirror_waiting_for_target) == 1`,
		For:    "10m",
		Labels: map[string]string{"severity": severityWarning},
		Annotations: annotations(
			"KafkaMirror "+mirrorRef+" cannot write {{ $labels.topic }}: its target topic is missing or has too few partitions",
			"The target topic's partition count drifted from the source (or the topic is missing), so the engine holds those partitions back. See the KafkaMirror's TopicsSynced condition and status.topics (kubectl describe kafkamirror).",
			"kafkamirrorwaitingfortarget"),
	},
	{
		Alert:  "KafkaMirrorTopicsDrifted",
		Expr:   `sum by (mirror_namespace, mirror) (kafka_mirror_operator_topics{state=~"mismatched|failed"}) > 0`,
		For:    "15m",
		Labels: map[string]string{"severity": severityWarning},
		Annotations: annotations(
			"KafkaMirror {{ $labels.mirror_namespace }}/{{ $labels.mirror }} has {{ $value }} target topics out of step with the source",
			"The operator's topic sync found target topics with more partitions than the source (never changed: partitions cannot be removed), drift it leaves alone (syncPartitions: false), or topics it could not create or expand. status.topics.items of the KafkaMirror names them and why.",
			"kafkamirrortopicsdrifted"),
	},
	{
		Alert:  "KafkaMirrorSendFailed",
		Expr:   `sum by (namespace, app_kubernetes_io_instance) (increase(kafka_mirror_send_errors_total[10m])) > 0`,
		Labels: map[string]string{"severity": severityCritical},
		Annotations: annotations(
			"KafkaMirror "+mirrorRef+" failed to deliver records; the engine stopped and restarts from its last commit",
			"A send to the target finally failed (after retries up to deliveryTimeout). Nothing past it was committed. The pod log names the topic, partition, offset and the broker's error.",
			"kafkamirrorsendfailed"),
	},
	{
		Alert:  "KafkaMirrorSourceOffsetsLost",
		Expr:   `sum by (namespace, app_kubernetes_io_instance, topic) (increase(kafka_mirror_resumed_from_target_total[1h])) > 0`,
		Labels: map[string]string{"severity": severityWarning},
		Annotations: annotations(
			"KafkaMirror "+mirrorRef+" found no source group offset for {{ $labels.topic }} and resumed from the target-side progress",
			"The source consumer group lost its offsets (expired after offsets.retention.minutes, or deleted). The mirror resumed from its target-side progress, so nothing was lost; find out why the group's offsets went away.",
			"kafkamirrorsourceoffsetslost"),
	},
	{
		// A re-created source topic is mirrored from its beginning (issue 30): nothing is
		// lost, but the target now holds two incarnations' records under one name, which
		// consumers of the target topic and whoever deleted the topic want to know.
		Alert:  "KafkaMirrorSourceTopicRecreated",
		Expr:   `sum by (namespace, app_kubernetes_io_instance, topic) (increase(kafka_mirror_topic_recreated_total[1h])) > 0`,
		Labels: map[string]string{"severity": severityWarning},
		Annotations: annotations(
			"KafkaMirror "+mirrorRef+" found source topic {{ $labels.topic }} deleted and created again",
			"The source topic has a new topic ID. The mirror ignored the old topic's stored positions and mirrors the new topic from its beginning, so nothing of it is lost; the target topic now holds the old topic's records followed by the new one's. Find out who re-created the topic, and tell the target topic's consumers.",
			"kafkamirrorsourcetopicrecreated"),
	},
	{
		// The operator's gauge, not the engine's: it is read from the target groups at
		// every topic sync, so it keeps ageing while the mirror pods are down. In normal
		// operation a checkpoint's reported age stays under groups.syncInterval (the
		// engine renews even an unchanged offset) plus topicSyncInterval (the operator
		// reads it back), which the operator exports per mirror; three such periods
		// plus 5 minutes for a pod restart and the scrape is well clear of that. Groups
		// with members on the target (state Skipped) are left alone on purpose and are
		// left out.
		Alert: "KafkaMirrorCheckpointsStale",
		Expr: `time() - max by (mirror_namespace, mirror, group) (kafka_mirror_operator_group_last_checkpoint_timestamp_seconds)
  > on (mirror_namespace, mirror) group_left ()
    (3 * max by (mirror_namespace, mirror) (kafka_mirror_operator_group_checkpoint_interval_seconds) + 300)
unless on (mirror_namespace, mirror, group)
  max by (mirror_namespace, mirror, group) (kafka_mirror_operator_group_active_members) > 0`,
		For:    "5m",
		Labels: map[string]string{"severity": severityWarning},
		Annotations: annotations(
			"KafkaMirror {{ $labels.mirror_namespace }}/{{ $labels.mirror }} last checkpointed group {{ $labels.group }} {{ $value | humanizeDuration }} ago",
			"The mirror's translated offsets of this consumer group on the target were not renewed for more than 3 x (groups.syncInterval + topicSyncInterval) + 5 minutes, although the engine renews them every groups.syncInterval: consumers failing over now would resume from an old position and read again what was mirrored since. The mirror pods are down or paused, the engine cannot commit to the target group, or the operator cannot read the target. Groups with members on the target (Skipped) are not alerted on.",
			"kafkamirrorcheckpointsstale"),
	},
	{
		Alert:  "KafkaMirrorNotReady",
		Expr:   `sum by (namespace, deployment) (kube_deployment_status_replicas_unavailable{deployment=~".+-mirror"}) > 0`,
		For:    "15m",
		Labels: map[string]string{"severity": severityWarning},
		Annotations: annotations(
			"Mirror Deployment {{ $labels.namespace }}/{{ $labels.deployment }} has had unavailable pods for 15 minutes",
			"Needs kube-state-metrics. A mirror pod is not Ready: it is crash-looping (kubectl logs --previous), cannot reach a cluster (its /readyz fails) or cannot be scheduled. The KafkaMirror's Ready condition says which.",
			"kafkamirrornotready"),
	},
}

// prometheusRule renders the alerts as a Prometheus Operator PrometheusRule.
func prometheusRule() ([]byte, error) {
	obj := map[string]any{
		"apiVersion": "monitoring.coreos.com/v1",
		"kind":       "PrometheusRule",
		"metadata": map[string]any{
			"name":   "kafka-mirror",
			"labels": map[string]string{"app.kubernetes.io/name": "kafka-mirror", "app.kubernetes.io/component": "monitoring"},
		},
		"spec": map[string]any{"groups": []ruleGroup{{Name: ruleGroupName, Rules: alerts}}},
	}
	out, err := yaml.Marshal(obj)
	if err != nil {
		return nil, fmt.Errorf("while encoding the PrometheusRule: %w", err)
	}
	return append([]byte(generatedHeader), out...), nil
}

// ruleGroups renders the groups alone: the chart's PrometheusRule template embeds them,
// and a plain Prometheus loads them as a rule file.
func ruleGroups() ([]byte, error) {
	out, err := yaml.Marshal(map[string]any{"groups": []ruleGroup{{Name: ruleGroupName, Rules: alerts}}})
	if err != nil {
		return nil, fmt.Errorf("while encoding the rule groups: %w", err)
	}
	return append([]byte(generatedHeader), out...), nil
}
