package kafka

import (
	"encoding/base64"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/kafka-mirror/kafka-mirror-operator/internal/testutil"
	"github.com/kafka-mirror/kafka-mirror-operator/mirror/config"
)

// tokenEndpoint is an OAuth 2.0 token endpoint for the client credentials grant that
// accepts one client and hands out tokens living expiresIn seconds.
func tokenEndpoint(t *testing.T, clientID, secret string, expiresIn int) (*httptest.Server, *atomic.Int32) {
	t.Helper()
	var issued atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id, sec, ok := r.BasicAuth()
		if err := r.ParseForm(); err != nil || r.Form.Get("grant_type") != "client_credentials" {
			http.Error(w, `{"error":"unsupported_grant_type"}`, http.StatusBadRequest)
			return
		}
		if !ok || id != clientID || sec != secret {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusUnauthorized)
			fmt.Fprint(w, `{"error":"invalid_client"}`)
			return
		}
		n := issued.Add(1)
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"access_token":"token-%d-%s","token_type":"bearer","expires_in":%d}`, n, r.Form.Get("scope"), expiresIn)
	}))
	t.Cleanup(srv.Close)
	return srv, &issued
}

// TestOAuthBearerTokens: OAUTHBEARER fetches tokens with the client credentials grant,
// sends the configured extensions, reuses a token until a minute before it expires, and
// reports a refused client without the secret.
func TestOAuthBearerTokens(t *testing.T) {
	const secret = "s3cr3t-value"
	secretFile := testutil.WriteFile(t, t.TempDir(), "client-secret", secret+"\n")
	cluster := func(tokenURL, secretFile string) config.Cluster {
		return config.Cluster{BootstrapServers: []string{"localhost:9092"}, SASL: &config.SASL{
			Mechanism: config.SASLOAuthBearer,
			OAuth: &config.OAuth{TokenURL: tokenURL, ClientID: "mirror", ClientSecretFile: secretFile,
				Scopes: []string{"kafka"}, Extensions: map[string]string{"logicalCluster": "lkc-123"}},
		}}
	}

	t.Run("long-lived token reused", func(t *testing.T) {
		srv, issued := tokenEndpoint(t, "mirror", secret, 3600)
		sc, err := NewConfig(cluster(srv.URL, secretFile), WithRole(RoleSource))
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i < 3; i++ {
			tok, err := sc.Net.SASL.TokenProvider.Token()
			if err != nil {
				t.Fatal(err)
			}
			expect(t, "token", tok.Token, "token-1-kafka")
			expect(t, "extension", tok.Extensions["logicalCluster"], "lkc-123")
		}
		expect(t, "tokens issued", issued.Load(), int32(1))
		expect(t, "mechanism", string(sc.Net.SASL.Mechanism), "OAUTHBEARER")
	})
	t.Run("token within the refresh margin fetched again", func(t *testing.T) {
		srv, issued := tokenEndpoint(t, "mirror", secret, 30)
		sc, err := NewConfig(cluster(srv.URL, secretFile), WithRole(RoleSource))
		if err != nil {
			t.Fatal(err)
		}
		for i := 1; i <= 2; i++ {
			tok, err := sc.Net.SASL.TokenProvider.Token()
			if err != nil {
				t.Fatal(err)
			}
			expect(t, "token", tok.Token, fmt.Sprintf("token-%d-kafka", i))
		}
		expect(t, "tokens issued", issued.Load(), int32(2))
	})
	t.Run("refused client: endpoint and error named, secret not", func(t *testing.T) {
		srv, _ := tokenEndpoint(t, "mirror", "another-secret", 3600)
		sc, err := NewConfig(cluster(srv.URL, secretFile), WithRole(RoleTarget))
		if err != nil {
			t.Fatal(err)
		}
		_, err = sc.Net.SASL.TokenProvider.Token()
		if err == nil || !strings.Contains(err.Error(), "while fetching an OAuth token from "+srv.URL) || !strings.Contains(err.Error(), "invalid_client") {
			t.Fatalf("error = %v, want the endpoint and invalid_client", err)
		}
		if strings.Contains(err.Error(), secret) {
			t.Fatalf("error %q holds the client secret", err)
		}
	})
	t.Run("missing secret file names the field", func(t *testing.T) {
		missing := filepath.Join(t.TempDir(), "nope")
		_, err := NewConfig(cluster("https://idp.example/token", missing), WithRole(RoleSource))
		if err == nil || !strings.HasPrefix(err.Error(), "source.sasl.oauth.clientSecretFile: open "+missing) {
			t.Fatalf("error = %v", err)
		}
	})
}

// TestMSKIAMToken: AWS_MSK_IAM signs, locally, a presigned kafka-cluster:Connect request
// for the cluster's region with the credentials of the default chain (here the
// environment's), and reuses it until a minute before it expires.
func TestMSKIAMToken(t *testing.T) {
	t.Setenv("AWS_ACCESS_KEY_ID", "AKIDEXAMPLEMIRROR")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY")
	t.Setenv("AWS_SESSION_TOKEN", "")
	t.Setenv("AWS_PROFILE", "")
	t.Setenv("AWS_CONFIG_FILE", filepath.Join(t.TempDir(), "none"))
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", filepath.Join(t.TempDir(), "none"))
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")

	sc, err := NewConfig(config.Cluster{BootstrapServers: []string{"b-1.msk.example:9098"},
		SASL: &config.SASL{Mechanism: config.SASLAWSMSKIAM, AWS: &config.AWS{Region: "eu-west-1"}}}, WithRole(RoleSource))
	if err != nil {
		t.Fatal(err)
	}
	expect(t, "mechanism", string(sc.Net.SASL.Mechanism), "OAUTHBEARER")
	tok, err := sc.Net.SASL.TokenProvider.Token()
	if err != nil {
		t.Fatal(err)
	}
	raw, err := base64.RawURLEncoding.DecodeString(tok.Token)
	if err != nil {
		t.Fatalf("token is not base64url: %v", err)
	}
	u, err := url.Parse(string(raw))
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	expect(t, "host", u.Host, "kafka.eu-west-1.amazonaws.com")
	expect(t, "action", q.Get("Action"), "kafka-cluster:Connect")
	if cred := q.Get("X-Amz-Credential"); !strings.HasPrefix(cred, "AKIDEXAMPLEMIRROR/") || !strings.Contains(cred, "/eu-west-1/kafka-cluster/") {
		t.Fatalf("X-Amz-Credential = %q", cred)
	}
	if q.Get("X-Amz-Signature") == "" {
		t.Fatal("the token is not signed")
	}
	again, err := sc.Net.SASL.TokenProvider.Token()
	if err != nil {
		t.Fatal(err)
	}
	expect(t, "reused token", again.Token, tok.Token)
}

func expect[T comparable](t *testing.T, what string, got, want T) {
	t.Helper()
	if got != want {
		t.Fatalf("%s = %v, want %v", what, got, want)
	}
}
