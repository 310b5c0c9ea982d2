package objstore

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// Counters are what this process did with object storage so far.
type Counters struct {
	Requests     int64 // API calls made (each retried attempt counts once more)
	Retries      int64 // attempts repeated after a transient failure
	BytesFetched int64 // object bytes read
	BytesSent    int64 // object bytes uploaded
}

var stats struct{ requests, retries, fetched, sent atomic.Int64 }

// Snapshot returns the counters.
func Snapshot() Counters {
	return Counters{Requests: stats.requests.Load(), Retries: stats.retries.Load(),
		BytesFetched: stats.fetched.Load(), BytesSent: stats.sent.Load()}
}

// Used reports whether this process has made any request to object storage.
func Used() bool { return stats.requests.Load() > 0 }

// settingsEnv are the variables a client depends on beyond the SDK's files:
// a client is made again when one of them changes (tests start servers).
var settingsEnv = []string{"AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY",
	"AWS_SESSION_TOKEN", "AWS_PROFILE", "AWS_REGION", "AWS_DEFAULT_REGION", "AWS_MAX_ATTEMPTS", "SYNAPSE_S3_ADDRESSING"}

var clients struct {
	sync.Mutex
	key string
	c   *s3.Client
	max int
}

// AddressingEnv switches between path-style and virtual-host-style requests.
const AddressingEnv = "SYNAPSE_S3_ADDRESSING"

// DefaultMaxAttempts is the attempts of a request when AWS_MAX_ATTEMPTS is not set.
const DefaultMaxAttempts = 5

// client returns the process's S3 client, made from the standard chain.
func client(ctx context.Context) (*s3.Client, int, error) {
	var key strings.Builder
	for _, v := range settingsEnv {
		key.WriteString(os.Getenv(v) + "\x00")
	}
	clients.Lock()
	defer clients.Unlock()
	if clients.c != nil && clients.key == key.String() {
		return clients.c, clients.max, nil
	}
	c, max, err := newClient(ctx)
	if err != nil {
		return nil, 0, err
	}
	clients.key, clients.c, clients.max = key.String(), c, max
	return c, max, nil
}

func newClient(ctx context.Context) (*s3.Client, int, error) {
	addressing := os.Getenv(AddressingEnv)
	if addressing != "" && addressing != "path" && addressing != "virtual" {
		return nil, 0, fmt.Errorf("objstore: %s=%q: want path or virtual", AddressingEnv, addressing)
	}
	cfg, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		return nil, 0, fmt.Errorf("objstore: AWS configuration: %w", err)
	}
	if cfg.Region == "" {
		cfg.Region = "us-east-1"
	}
	max := cfg.RetryMaxAttempts
	if max <= 0 {
		max = DefaultMaxAttempts
	}
	endpoint := cfg.BaseEndpoint != nil || os.Getenv("AWS_ENDPOINT_URL_S3") != ""
	c := s3.NewFromConfig(cfg, func(o *s3.Options) {
		o.UsePathStyle = addressing == "path" || (addressing == "" && endpoint)
		o.Retryer = &countingRetryer{retry.NewStandard(func(so *retry.StandardOptions) {
			so.MaxAttempts = max
			so.MaxBackoff = 10 * time.Second
			so.RateLimiter = ratelimit.None
		})}
		if endpoint && os.Getenv("AWS_REQUEST_CHECKSUM_CALCULATION") == "" {
			// S3-compatible servers differ in the checksums they accept;
			// SigV4 signs the payload's SHA-256 anyway.
			o.RequestChecksumCalculation = aws.RequestChecksumCalculationWhenRequired
			o.ResponseChecksumValidation = aws.ResponseChecksumValidationWhenRequired
		}
		o.APIOptions = append(o.APIOptions, countRequests)
	})
	return c, max, nil
}

// countingRetryer is the standard retryer, counting the retries.
type countingRetryer struct{ aws.RetryerV2 }

func (r *countingRetryer) RetryDelay(attempt int, err error) (time.Duration, error) {
	stats.retries.Add(1)
	return r.RetryerV2.RetryDelay(attempt, err)
}

// backoff is the wait before retry attempt (1, 2, …) of a body read.
func backoff(attempt int) time.Duration {
	return min(100*time.Millisecond<<attempt, 5*time.Second)
}

// sleep waits d or until ctx is done.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// transient reports whether a failed body read is worth another attempt.
func transient(ctx context.Context, err error) bool {
	if ctx.Err() != nil || Permanent(err) {
		return false
	}
	var re interface{ HTTPStatusCode() int }
	if errors.As(err, &re) && re.HTTPStatusCode() < 500 && re.HTTPStatusCode() != http.StatusTooManyRequests {
		return false
	}
	return true
}
