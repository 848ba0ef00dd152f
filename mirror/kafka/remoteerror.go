package kafka

import (
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/aws/smithy-go"
	"golang.org/x/oauth2"
)

// maxRemoteErrorLen bounds what of an error that did not come as a parsed HTTP answer is
// kept: its first line, at most this many bytes.
const maxRemoteErrorLen = 200

// oauthErrorCodes are the error codes of RFC 6749 section 5.2: the only words of a token
// endpoint's answer that an error message repeats.
var oauthErrorCodes = map[string]bool{
	"invalid_request": true, "invalid_client": true, "invalid_grant": true,
	"unauthorized_client": true, "unsupported_grant_type": true, "invalid_scope": true,
}

// remoteError is an error answered by an HTTP endpoint that a config names (an OAuth
// token endpoint now; a schema registry or an STS endpoint would be the same), cut to
// what can be shown to whoever reads status, events and logs: the status code, its
// standard text and a standard error code. The endpoint's body and reason phrase are the
// remote party's words (a tenant may name any endpoint the allow-list admits, and its
// answer may carry what it should not): they are dropped.
type remoteError struct {
	status int
	code   string
}

func (e *remoteError) Error() string {
	msg := fmt.Sprintf("the endpoint answered %d", e.status)
	if text := http.StatusText(e.status); text != "" {
		msg += " " + text
	}
	if e.code != "" {
		msg += " (" + e.code + ")"
	}
	return msg
}

// cutRemoteError turns an x/oauth2 error into a remoteError, and cuts any other error to
// its first line and maxRemoteErrorLen bytes.
func cutRemoteError(err error) error {
	var re *oauth2.RetrieveError
	if errors.As(err, &re) && re.Response != nil {
		out := &remoteError{status: re.Response.StatusCode}
		if oauthErrorCodes[re.ErrorCode] {
			out.code = re.ErrorCode
		}
		return out
	}
	msg, _, _ := strings.Cut(err.Error(), "\n")
	if len(msg) > maxRemoteErrorLen {
		msg = msg[:maxRemoteErrorLen] + "..."
	}
	return errors.New(msg)
}

// noRedirects makes an HTTP client stop at a redirect: an endpoint the allow-list
// admitted must not send the request, and the credentials in it, somewhere else.
func noRedirects(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }

// cutAWSError keeps of an AWS error (STS refusing to assume a role, say) its error code:
// AWS's message names the caller's identity and the role ("User: arn:aws:sts::...:assumed-role/...
// is not authorized to perform: sts:AssumeRole on resource: ..."), which must not reach a
// tenant's status. Any other error is cut like cutRemoteError's.
func cutAWSError(err error) error {
	var api smithy.APIError
	if errors.As(err, &api) {
		return fmt.Errorf("AWS answered %s", api.ErrorCode())
	}
	return cutRemoteError(err)
}
