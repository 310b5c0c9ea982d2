package status

import (
	"fmt"
	"io"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/synapse-embed/synapse/io/corpus"
	"github.com/synapse-embed/synapse/pipeline"
	"github.com/synapse-embed/synapse/supervise"
)

// BenchmarkScrape is one /metrics and one /healthz request of a job with
// 16 workers, served in process (no network).
func BenchmarkScrape(b *testing.B) {
	s, err := Listen("127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	s.Start(&pipeline.Stats{})
	defer s.Close(b.Context())
	var h supervise.Health
	for i := range 16 {
		h.Workers = append(h.Workers, supervise.WorkerHealth{ID: fmt.Sprint("w", i), State: supervise.StateBusy, RSSMB: 100})
	}
	h.Crashes = map[string]int{"recv": 3}
	s.Attach(Run{Kind: "embed", Model: "m", Health: func() supervise.Health { return h }, Estimate: corpus.Estimate{JSONLBytes: 1 << 30}})
	for range 1000 {
		s.Request(time.Duration(1+len(h.Workers))*time.Millisecond, nil)
	}
	s.ErrorRecord("engine_crashed")
	mux := s.http.Handler
	b.ResetTimer()
	for b.Loop() {
		for _, path := range []string{"/metrics", "/healthz"} {
			rec := httptest.NewRecorder()
			mux.ServeHTTP(rec, httptest.NewRequest("GET", path, nil))
			if rec.Code != 200 {
				b.Fatalf("%s: %d", path, rec.Code)
			}
			io.Copy(io.Discard, rec.Body)
		}
	}
}
