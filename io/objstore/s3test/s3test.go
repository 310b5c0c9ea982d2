// Package s3test starts a real S3-compatible server (versitygw over a
// temporary directory, built by `make s3-server`) for the tests of object
// storage, and stops it when the test ends.
package s3test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
)

// Version is the versitygw release `make s3-server` builds (Makefile VERSITYGW_VERSION).
const Version = "v1.8.0"

// BinaryEnv names the server binary; the Makefile exports it.
const BinaryEnv = "SYNAPSE_S3_SERVER"

// Credentials of the server's root user.
const (
	AccessKey = "synapse-test-access"
	SecretKey = "synapse-test-secret-key"
	Region    = "us-east-1"
)

// Server is a running versitygw.
type Server struct {
	Endpoint string // http://127.0.0.1:PORT
	Dir      string // the buckets' directory
	addr     string
	bin      string
	cmd      *exec.Cmd
	exited   chan struct{}
	logPath  string
}

// RequireEnv names the variable that, set to 1, turns a missing server
// into a test failure instead of a skip (`make test-s3` sets it).
const RequireEnv = "SYNAPSE_S3_TEST"

// binary finds the server: $SYNAPSE_S3_SERVER, else the checkout's cache.
// When it is not built the test is skipped, saying so (the skip summary of
// `make test` counts it), unless SYNAPSE_S3_TEST=1: then it fails.
func binary(t testing.TB) string {
	t.Helper()
	bin := os.Getenv(BinaryEnv)
	if bin == "" {
		_, file, _, _ := runtime.Caller(0)
		bin = filepath.Join(filepath.Dir(file), "..", "..", "..", ".cache", "versitygw", Version, "versitygw")
	}
	if _, err := os.Stat(bin); err != nil {
		msg := fmt.Sprintf("S3 test: the S3 test server (versitygw %s) is not built: `make test-s3` builds it and runs these tests (%v)", Version, err)
		if os.Getenv(RequireEnv) == "1" {
			t.Fatalf("%s (%s=1)", msg, RequireEnv)
		}
		t.Skip(msg)
	}
	return bin
}

// Start starts a server on a free 127.0.0.1 port with the given buckets
// and stops it when the test ends.
func Start(t testing.TB, buckets ...string) *Server {
	t.Helper()
	s := &Server{bin: binary(t), Dir: t.TempDir()}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s.addr = l.Addr().String()
	l.Close()
	s.Endpoint = "http://" + s.addr
	s.logPath = filepath.Join(t.TempDir(), "versitygw.log")
	if err := s.start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Kill)
	c := s.Client()
	for _, b := range buckets {
		if _, err := c.CreateBucket(context.Background(), &s3.CreateBucketInput{Bucket: aws.String(b)}); err != nil {
			t.Fatalf("create bucket %s: %v", b, err)
		}
	}
	return s
}

// start runs the server and waits until it accepts connections.
func (s *Server) start() error {
	log, err := os.OpenFile(s.logPath, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	defer log.Close()
	cmd := exec.Command(s.bin, "--access", AccessKey, "--secret", SecretKey, "--region", Region,
		"--port", s.addr, "--quiet", "posix", s.Dir)
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("s3test: start %s: %w", s.bin, err)
	}
	s.cmd, s.exited = cmd, make(chan struct{})
	go func() { cmd.Wait(); close(s.exited) }()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-s.exited:
			return fmt.Errorf("s3test: versitygw exited at start: %s", s.Log())
		default:
		}
		if c, err := net.DialTimeout("tcp", s.addr, time.Second); err == nil {
			c.Close()
			return nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	s.Kill()
	return fmt.Errorf("s3test: versitygw did not listen on %s within 30s: %s", s.addr, s.Log())
}

// Kill stops the server (SIGKILL) and waits for it; safe to call twice.
func (s *Server) Kill() {
	if s.cmd == nil {
		return
	}
	s.cmd.Process.Kill()
	<-s.exited
	s.cmd = nil
}

// Restart starts the server again on the same port and directory.
func (s *Server) Restart(t testing.TB) {
	t.Helper()
	s.Kill()
	if err := s.start(); err != nil {
		t.Fatal(err)
	}
}

// Log is the server's output so far.
func (s *Server) Log() string {
	b, _ := os.ReadFile(s.logPath)
	return string(b)
}

// Env is the environment that points synapse (the AWS SDK's standard
// chain) at the server, with its root user's credentials.
func (s *Server) Env() []string {
	return []string{"AWS_ENDPOINT_URL=" + s.Endpoint, "AWS_ACCESS_KEY_ID=" + AccessKey,
		"AWS_SECRET_ACCESS_KEY=" + SecretKey, "AWS_REGION=" + Region, "AWS_MAX_ATTEMPTS=3",
		"AWS_CONFIG_FILE=/dev/null", "AWS_SHARED_CREDENTIALS_FILE=/dev/null"}
}

// Setenv sets Env in this process for the test (not parallel tests).
func (s *Server) Setenv(t testing.TB) {
	for _, kv := range s.Env() {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}
	t.Setenv("AWS_ENDPOINT_URL_S3", "")
	t.Setenv("AWS_PROFILE", "")
	t.Setenv("AWS_SESSION_TOKEN", "")
}

// Client is an S3 client of the server, for setting up and checking.
func (s *Server) Client() *s3.Client {
	return s3.New(s3.Options{Region: Region, BaseEndpoint: aws.String(s.Endpoint), UsePathStyle: true,
		Credentials: credentials.NewStaticCredentialsProvider(AccessKey, SecretKey, "")})
}

// Put writes an object.
func (s *Server) Put(t testing.TB, bucket, key string, body []byte) {
	t.Helper()
	_, err := s.Client().PutObject(context.Background(), &s3.PutObjectInput{Bucket: &bucket, Key: &key,
		Body: strings.NewReader(string(body))})
	if err != nil {
		t.Fatalf("put s3://%s/%s: %v", bucket, key, err)
	}
}

// PutFile uploads a local file.
func (s *Server) PutFile(t testing.TB, bucket, key, path string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	s.Put(t, bucket, key, b)
}

// Get reads an object; ok is false when it does not exist.
func (s *Server) Get(t testing.TB, bucket, key string) (body []byte, ok bool) {
	t.Helper()
	out, err := s.Client().GetObject(context.Background(), &s3.GetObjectInput{Bucket: &bucket, Key: &key})
	if err != nil {
		var nk *types.NoSuchKey
		if errors.As(err, &nk) {
			return nil, false
		}
		t.Fatalf("get s3://%s/%s: %v", bucket, key, err)
	}
	defer out.Body.Close()
	var b strings.Builder
	if _, err := bufio.NewReader(out.Body).WriteTo(&b); err != nil {
		t.Fatal(err)
	}
	return []byte(b.String()), true
}

// Keys lists the keys of a bucket under prefix.
func (s *Server) Keys(t testing.TB, bucket, prefix string) []string {
	t.Helper()
	out, err := s.Client().ListObjectsV2(context.Background(), &s3.ListObjectsV2Input{Bucket: &bucket, Prefix: &prefix})
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, o := range out.Contents {
		keys = append(keys, aws.ToString(o.Key))
	}
	return keys
}

// Uploads lists the incomplete multipart uploads of a bucket.
func (s *Server) Uploads(t testing.TB, bucket string) []string {
	t.Helper()
	out, err := s.Client().ListMultipartUploads(context.Background(), &s3.ListMultipartUploadsInput{Bucket: &bucket})
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, u := range out.Uploads {
		keys = append(keys, aws.ToString(u.Key))
	}
	return keys
}
