package kafka

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/aws/smithy-go"
	"github.com/kafka-mirror/kafka-mirror-operator/mirror/config"
)

// TestOAuthErrorBodyNotRepeated: a token endpoint's answer is the remote party's text (a
// tenant can name any endpoint); the error reaching status, events and logs carries its
// status code and, for a standard OAuth error, the code, never the body or a redirect.
func TestOAuthErrorBodyNotRepeated(t *testing.T) {
	const leak = "internal-db-password=hunter2 stack trace at /srv/idp"
	tests := map[string]struct {
		handler func(w http.ResponseWriter, r *http.Request)
		want    string
	}{
		"500 with a text body": {
			handler: func(w http.ResponseWriter, r *http.Request) { http.Error(w, leak, http.StatusInternalServerError) },
			want:    "500 Internal Server Error",
		},
		"400 with an OAuth error and description": {
			handler: func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusBadRequest)
				_, _ = w.Write([]byte(`{"error":"invalid_client","error_description":"` + leak + `"}`))
			},
			want: "400 Bad Request (invalid_client)",
		},
		"400 with a made-up error code": {
			handler: func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusBadRequest)
				_, _ = w.Write([]byte(`{"error":"` + leak + `"}`))
			},
			want: "400 Bad Request",
		},
		"a status line with a made-up reason": {
			handler: func(w http.ResponseWriter, r *http.Request) {
				w.WriteHeader(599)
				_, _ = w.Write([]byte(leak))
			},
			want: "answered 599",
		},
		"a redirect elsewhere is not followed": {
			handler: func(w http.ResponseWriter, r *http.Request) {
				http.Redirect(w, r, "http://elsewhere.invalid/"+strings.ReplaceAll(leak, " ", "-"), http.StatusTemporaryRedirect)
			},
			want: "307 Temporary Redirect",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(tc.handler))
			defer srv.Close()
			p := newOAuthTokenProvider(&config.OAuth{TokenURL: srv.URL + "/token", ClientID: "mirror"}, "s3cr3t")
			_, err := p.Token()
			if err == nil {
				t.Fatal("Token succeeded against a failing endpoint")
			}
			msg := err.Error()
			for _, bad := range []string{"hunter2", "stack trace", "elsewhere", "s3cr3t", "\n"} {
				if strings.Contains(msg, bad) {
					t.Errorf("error %q repeats %q from the endpoint's answer", msg, bad)
				}
			}
			if !strings.Contains(msg, tc.want) || !strings.Contains(msg, srv.URL+"/token") {
				t.Errorf("error %q: want it to name the endpoint and %q", msg, tc.want)
			}
		})
	}
}

// TestAWSErrorMessageNotRepeated: STS's refusal names the caller's role; only its code is kept.
func TestAWSErrorMessageNotRepeated(t *testing.T) {
	err := fmt.Errorf("operation error STS: AssumeRole: %w", &smithy.GenericAPIError{Code: "AccessDenied",
		Message: "User: arn:aws:sts::123456789012:assumed-role/kafka-mirror-operator/i-0 is not authorized to perform: sts:AssumeRole"})
	got := cutAWSError(err).Error()
	if got != "AWS answered AccessDenied" {
		t.Errorf("cutAWSError = %q, want only the code", got)
	}
}
