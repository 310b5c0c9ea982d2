package objstore

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/aws/smithy-go"
	"github.com/aws/smithy-go/middleware"
	smithyhttp "github.com/aws/smithy-go/transport/http"
)

// permanentCodes are the S3 error codes running again cannot cure.
var permanentCodes = map[string]string{
	"NoSuchBucket":                 "no such bucket",
	"NoSuchKey":                    "no such key",
	"NotFound":                     "not found",
	"Forbidden":                    "access denied, or the credentials are refused",
	"AccessDenied":                 "access denied",
	"AllAccessDisabled":            "access denied",
	"InvalidAccessKeyId":           "the access key id is not known to the server",
	"SignatureDoesNotMatch":        "the secret access key does not match (signature mismatch)",
	"InvalidBucketName":            "invalid bucket name",
	"ExpiredToken":                 "the credentials have expired",
	"InvalidToken":                 "the session token is invalid",
	"PermanentRedirect":            "the bucket is in another region (set AWS_REGION)",
	"AuthorizationHeaderMalformed": "the authorization header is malformed (check AWS_REGION)",
}

// Permanent reports whether err is a failure running again cannot cure: a
// missing bucket or key, access denied, credentials the server refuses, a
// malformed URL.
func Permanent(err error) bool {
	if errors.Is(err, ErrBadURL) {
		return true
	}
	var ae smithy.APIError
	if errors.As(err, &ae) {
		if _, ok := permanentCodes[ae.ErrorCode()]; ok {
			return true
		}
	}
	var re *smithyhttp.ResponseError
	if errors.As(err, &re) {
		switch re.HTTPStatusCode() {
		case http.StatusNotFound, http.StatusForbidden, http.StatusUnauthorized:
			return true
		}
	}
	return false
}

// NotFound reports whether err says the bucket or the object does not exist.
func NotFound(err error) bool {
	var ae smithy.APIError
	if errors.As(err, &ae) {
		switch ae.ErrorCode() {
		case "NoSuchKey", "NotFound", "NoSuchBucket":
			return true
		}
	}
	var re *smithyhttp.ResponseError
	return errors.As(err, &re) && re.HTTPStatusCode() == http.StatusNotFound
}

// Error is a failed operation on an object: the URL and what went wrong, in
// words when the server's error code is one of the permanent ones.
type Error struct {
	Op  string // "read", "write", "list", ...
	URL string
	Err error
}

func (e *Error) Error() string {
	var ae smithy.APIError
	if errors.As(e.Err, &ae) {
		if words, ok := permanentCodes[ae.ErrorCode()]; ok {
			return fmt.Sprintf("%s %s: %s (%s)", e.Op, e.URL, words, ae.ErrorCode())
		}
	}
	return fmt.Sprintf("%s %s: %v", e.Op, e.URL, e.Err)
}

func (e *Error) Unwrap() error { return e.Err }

func opError(op, url string, err error) error {
	if err == nil {
		return nil
	}
	return &Error{Op: op, URL: url, Err: err}
}

// countRequests adds a step that counts every attempt of every request.
func countRequests(stack *middleware.Stack) error {
	return stack.Finalize.Add(middleware.FinalizeMiddlewareFunc("synapseCountRequests",
		func(ctx context.Context, in middleware.FinalizeInput, next middleware.FinalizeHandler) (middleware.FinalizeOutput, middleware.Metadata, error) {
			stats.requests.Add(1)
			return next.HandleFinalize(ctx, in)
		}), middleware.After)
}
