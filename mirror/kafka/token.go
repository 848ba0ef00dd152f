package kafka

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/IBM/sarama"
	"github.com/aws/aws-msk-iam-sasl-signer-go/signer"
	"github.com/aws/aws-sdk-go-v2/aws"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials/stscreds"
	"github.com/aws/aws-sdk-go-v2/service/sts"
	"golang.org/x/oauth2"
	"golang.org/x/oauth2/clientcredentials"

	"github.com/kafka-mirror/kafka-mirror-operator/mirror/config"
)

const (
	// tokenRefreshMargin is how long before its expiry a token is replaced, so a
	// connection never authenticates with a token about to expire.
	tokenRefreshMargin = time.Minute
	// tokenFetchTimeout bounds one token request (OAuth token endpoint, AWS STS).
	tokenFetchTimeout = 30 * time.Second
	// mskSessionName names the AWS STS session when the mirror assumes a role.
	mskSessionName = "kafka-mirror"
)

// oauthTokenProvider serves SASL/OAUTHBEARER tokens from an OAuth 2.0 client
// credentials grant, fetched again tokenRefreshMargin before they expire.
type oauthTokenProvider struct {
	source     oauth2.TokenSource
	extensions map[string]string
	endpoint   string
}

func newOAuthTokenProvider(o *config.OAuth, secret string) *oauthTokenProvider {
	cc := &clientcredentials.Config{
		ClientID: o.ClientID, ClientSecret: secret, TokenURL: o.TokenURL, Scopes: o.Scopes,
		AuthStyle: oauth2.AuthStyleInHeader,
	}
	ctx := context.WithValue(context.Background(), oauth2.HTTPClient, &http.Client{Timeout: tokenFetchTimeout, CheckRedirect: noRedirects})
	fetch := tokenSourceFunc(func() (*oauth2.Token, error) { return cc.Token(ctx) })
	return &oauthTokenProvider{
		source:     oauth2.ReuseTokenSourceWithExpiry(nil, fetch, tokenRefreshMargin),
		extensions: o.Extensions,
		endpoint:   o.TokenURL,
	}
}

// Token implements sarama.AccessTokenProvider; sarama calls it for every connection.
func (p *oauthTokenProvider) Token() (*sarama.AccessToken, error) {
	t, err := p.source.Token()
	if err != nil {
		// The error names the endpoint, its status code and a standard OAuth error code:
		// never the secret, never the endpoint's own words (cutRemoteError).
		return nil, fmt.Errorf("while fetching an OAuth token from %s: %w", p.endpoint, cutRemoteError(err))
	}
	return &sarama.AccessToken{Token: t.AccessToken, Extensions: p.extensions}, nil
}

type tokenSourceFunc func() (*oauth2.Token, error)

func (f tokenSourceFunc) Token() (*oauth2.Token, error) { return f() }

// mskTokenProvider serves AWS MSK IAM tokens (a SigV4-presigned request, signed locally
// with the pod's AWS credentials: IRSA, EKS Pod Identity, instance profile or
// environment, or a role assumed from them), reused until tokenRefreshMargin before
// expiry.
type mskTokenProvider struct {
	region string
	creds  aws.CredentialsProvider

	mu      sync.Mutex
	token   string
	expires time.Time
}

func newMSKTokenProvider(a *config.AWS) (*mskTokenProvider, error) {
	ctx, cancel := context.WithTimeout(context.Background(), tokenFetchTimeout)
	defer cancel()
	cfg, err := awsconfig.LoadDefaultConfig(ctx, awsconfig.WithRegion(a.Region))
	if err != nil {
		return nil, fmt.Errorf("while loading the AWS configuration: %w", err)
	}
	creds := cfg.Credentials
	if a.RoleARN != "" {
		creds = aws.NewCredentialsCache(stscreds.NewAssumeRoleProvider(sts.NewFromConfig(cfg), a.RoleARN,
			func(o *stscreds.AssumeRoleOptions) { o.RoleSessionName = mskSessionName }))
	}
	return &mskTokenProvider{region: a.Region, creds: creds}, nil
}

// Token implements sarama.AccessTokenProvider.
func (p *mskTokenProvider) Token() (*sarama.AccessToken, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.token != "" && time.Until(p.expires) > tokenRefreshMargin {
		return &sarama.AccessToken{Token: p.token}, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), tokenFetchTimeout)
	defer cancel()
	token, expiresMs, err := signer.GenerateAuthTokenFromCredentialsProvider(ctx, p.region, p.creds)
	if err != nil {
		return nil, fmt.Errorf("while signing an AWS MSK IAM token in %s: %w", p.region, cutAWSError(err))
	}
	p.token, p.expires = token, time.UnixMilli(expiresMs)
	return &sarama.AccessToken{Token: token}, nil
}

// configureTokenSASL sets up SASL/OAUTHBEARER with a token provider.
func configureTokenSASL(sc *sarama.Config, s *config.SASL, o options) error {
	sc.Net.SASL.Enable = true
	sc.Net.SASL.Handshake = true
	sc.Net.SASL.Version = sarama.SASLHandshakeV1
	sc.Net.SASL.Mechanism = sarama.SASLTypeOAuth
	switch s.Mechanism {
	case config.SASLOAuthBearer:
		if s.OAuth == nil {
			return fmt.Errorf("%s.sasl.oauth: required for %s", o.role, s.Mechanism)
		}
		secret, err := o.readFile(s.OAuth.ClientSecretFile)
		if err != nil {
			return fmt.Errorf("%s.sasl.oauth.clientSecretFile: %w", o.role, err)
		}
		sc.Net.SASL.TokenProvider = newOAuthTokenProvider(s.OAuth, strings.TrimRight(string(secret), "\r\n"))
	case config.SASLAWSMSKIAM:
		if s.AWS == nil {
			return fmt.Errorf("%s.sasl.aws: required for %s", o.role, s.Mechanism)
		}
		p, err := newMSKTokenProvider(s.AWS)
		if err != nil {
			return fmt.Errorf("%s.sasl.aws: %w", o.role, err)
		}
		sc.Net.SASL.TokenProvider = p
	}
	return nil
}
