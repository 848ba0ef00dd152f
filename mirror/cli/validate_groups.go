package cli

import (
	"fmt"
	"strings"

	"github.com/kafka-mirror/kafka-mirror-operator/mirror/config"
)

// addGroupProblems checks the valid KafkaMirrors of all files against each other: two
// that use one consumer group on the same source cluster, or into the same target
// cluster (config.SharedGroup), would split partitions and commit for each other, and
// the operator refuses the later one with reason ConsumerGroupInUse. The second of the
// pair gets the problem, in place of its OK line. MirrorConfig documents are left out:
// the same config run twice is one mirror scaled out, and a MirrorConfig given with a
// KafkaMirror is often that KafkaMirror's config, written for `kafka-mirror run`.
func addGroupProblems(files []fileResult) {
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
			if !ma.kafkaMirror || !mb.kafkaMirror || sameObject(ma.name, mb.name) {
				continue
			}
			role := config.SharedGroup(mb.cfg, ma.cfg)
			if role == "" {
				continue
			}
			const path = "spec.consumerGroup"
			other := ma.name
			if a.file != b.file {
				other += " in " + files[a.file].path
			}
			r := &files[b.file].result
			r.problems = append(r.problems, fmt.Sprintf("%s (%s): %s: Invalid value: %q: %s uses this consumer group %s too; a consumer group (with its progress group, offset-sync topic and transactional ids) belongs to one mirror per cluster: give one of them a spec.consumerGroup of its own",
				mb.label, mb.name, path, mb.cfg.ConsumerGroup, other, sharedWhere(role)))
			removeOK(r, mb.ok)
			break
		}
	}
}

// sharedWhere says where two mirrors would share a group, for a problem line.
func sharedWhere(role string) string {
	if role == "source" {
		return "on the same source cluster"
	}
	return "into the same target cluster"
}

// sameObject tells whether two KafkaMirror labels ("KafkaMirror ns/name", or without a
// namespace, which kubectl puts in "default") name one object: the same manifest
// given twice is not two mirrors.
func sameObject(a, b string) bool {
	norm := func(s string) string {
		name := strings.TrimPrefix(s, "KafkaMirror ")
		if !strings.Contains(name, "/") {
			name = "default/" + name
		}
		return name
	}
	return norm(a) == norm(b)
}

// removeOK drops one OK line from r.
func removeOK(r *result, ok string) {
	for i, s := range r.ok {
		if s == ok {
			r.ok = append(r.ok[:i], r.ok[i+1:]...)
			return
		}
	}
}

// replaceOK replaces one OK line of r.
func replaceOK(r *result, ok, with string) {
	for i, s := range r.ok {
		if s == ok {
			r.ok[i] = with
			return
		}
	}
}
