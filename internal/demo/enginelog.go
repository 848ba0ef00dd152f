package demo

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"sync"
)

// storyMessages are the engine log lines worth showing in the demo's story: they are
// the engine's side of what the demo does to it. Everything else stays in the log file.
var storyMessages = map[string]bool{
	"Created target topic":                             true,
	"Expanded target topic":                            true,
	"Paused partition until its target topic is ready": true,
	"Resumed partition: its target topic is ready":     true,
	"Joined the consumer group":                        true,
	"Released partitions":                              true,
	"Stopped the mirror cleanly":                       true,
	"Stopped the mirror on a fatal error":              true,
}

// logTap copies the engine's output to its log file and passes the lines worth telling
// (storyMessages and every error) to tell. exec.Cmd writes stdout and stderr through
// one goroutine at a time when both are the same writer, and the mutex covers the rest.
type logTap struct {
	mu   sync.Mutex
	file io.Writer
	buf  []byte
	tell func(string)
}

func (t *logTap) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	n, err := t.file.Write(p)
	t.buf = append(t.buf, p...)
	for {
		i := bytes.IndexByte(t.buf, '\n')
		if i < 0 {
			break
		}
		if line, ok := storyLine(string(t.buf[:i])); ok {
			t.tell(line)
		}
		t.buf = t.buf[i+1:]
	}
	return n, err
}

// storyLine reads one line of the engine's console log (time, level, [logger,] caller,
// message, JSON fields; tab-separated) and renders it for the story when it matters.
func storyLine(line string) (string, bool) {
	parts := strings.Split(line, "\t")
	if len(parts) < 4 {
		return "", false
	}
	level := parts[1]
	msg, fields := parts[len(parts)-1], ""
	if strings.HasPrefix(msg, "{") {
		msg, fields = parts[len(parts)-2], parts[len(parts)-1]
	}
	if !storyMessages[msg] && level != "ERROR" {
		return "", false
	}
	kv := renderFields(fields)
	if kv == "" {
		return "engine: " + msg, true
	}
	return "engine: " + msg + " (" + kv + ")", true
}

// renderFields turns a JSON object into key=value pairs in their logged order. A long
// partition list becomes its length.
func renderFields(fields string) string {
	if fields == "" {
		return ""
	}
	dec := json.NewDecoder(strings.NewReader(fields))
	dec.UseNumber() // 9444538, not 9.444538e+06
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return fields
	}
	var out []string
	for dec.More() {
		key, err := dec.Token()
		if err != nil {
			return fields
		}
		var v any
		if err := dec.Decode(&v); err != nil {
			return fields
		}
		s := fmt.Sprint(v)
		if str, ok := v.(string); ok && key == "partitions" && strings.Count(str, ",") > 2 {
			s = fmt.Sprintf("%d", strings.Count(str, ",")+1)
		}
		out = append(out, fmt.Sprintf("%v=%s", key, s))
	}
	return strings.Join(out, " ")
}
