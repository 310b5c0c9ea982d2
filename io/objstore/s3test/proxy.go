package s3test

import (
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

// Proxy is an HTTP proxy in front of a Server for fault drills: it passes
// every request through until one matching its armed trigger arrives; then
// it runs the drill's action (killing the server, say) and cuts that
// request's connection without an answer.
type Proxy struct {
	URL   string
	srv   *http.Server
	mu    sync.Mutex
	match func(*http.Request) bool
	act   func() int
	fired atomic.Bool
}

// Proxy starts a proxy in front of s, stopped when the test ends.
func (s *Server) Proxy(t testing.TB) *Proxy {
	t.Helper()
	target, _ := url.Parse(s.Endpoint)
	rp := httputil.NewSingleHostReverseProxy(target) // keeps the Host header the client signed
	p := &Proxy{}
	p.srv = &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.mu.Lock()
		match, act := p.match, p.act
		if match != nil && match(r) {
			p.match = nil
		} else {
			match = nil
		}
		p.mu.Unlock()
		if match != nil {
			p.fired.Store(true)
			if status := act(); status != 0 {
				w.Header().Set("Content-Type", "application/xml")
				w.WriteHeader(status)
				fmt.Fprintf(w, "<Error><Code>%s</Code><Message>drill</Message></Error>", http.StatusText(status))
				return
			}
			panic(http.ErrAbortHandler) // the connection is cut, no response
		}
		rp.ServeHTTP(w, r)
	})}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p.URL = "http://" + l.Addr().String()
	go p.srv.Serve(l)
	t.Cleanup(func() { p.srv.Close() })
	return p
}

// Arm makes the next request matching match run act and be cut.
func (p *Proxy) Arm(match func(*http.Request) bool, act func()) {
	p.arm(match, func() int { act(); return 0 })
}

// ArmStatus makes the next request matching match get an S3 error answer
// with this HTTP status (503: the server is busy, "slow down").
func (p *Proxy) ArmStatus(match func(*http.Request) bool, status int) {
	p.arm(match, func() int { return status })
}

func (p *Proxy) arm(match func(*http.Request) bool, act func() int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.match, p.act = match, act
	p.fired.Store(false)
}

// Fired reports whether the armed drill ran.
func (p *Proxy) Fired() bool { return p.fired.Load() }

// Env is the server's Env with the proxy as the endpoint.
func (p *Proxy) Env(s *Server) []string {
	env := s.Env()
	for i, kv := range env {
		if strings.HasPrefix(kv, "AWS_ENDPOINT_URL=") {
			env[i] = "AWS_ENDPOINT_URL=" + p.URL
		}
	}
	return env
}

// Writes matches a request that writes to the object bucket/key (a PUT, a
// multipart upload's creation, parts or completion).
func Writes(bucket, key string) func(*http.Request) bool {
	return func(r *http.Request) bool {
		return (r.Method == http.MethodPut || r.Method == http.MethodPost) && r.URL.Path == "/"+bucket+"/"+key
	}
}
