// Package promtest reads Prometheus text exposition in tests: a scrape's
// metric families and the value of one series.
package promtest

import (
	"bytes"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Parse parses a /metrics body with the Prometheus text parser, failing
// the test if it does not parse.
func Parse(t testing.TB, body []byte) map[string]*dto.MetricFamily {
	t.Helper()
	p := expfmt.NewTextParser(model.UTF8Validation)
	mf, err := p.TextToMetricFamilies(bytes.NewReader(body))
	if err != nil {
		t.Fatalf("/metrics does not parse: %v\n%s", err, body)
	}
	return mf
}

// Value is the value of a counter or gauge (a histogram's sample count)
// with the given labels (name, value pairs), summed over the series that
// have them; the test fails if there is none.
func Value(t testing.TB, mf map[string]*dto.MetricFamily, name string, labels ...string) float64 {
	t.Helper()
	f := mf[name]
	if f == nil {
		t.Fatalf("/metrics has no %s", name)
	}
	sum, found := 0.0, false
	for _, m := range f.Metric {
		if !hasLabels(m, labels) {
			continue
		}
		found = true
		switch {
		case m.Counter != nil:
			sum += m.Counter.GetValue()
		case m.Gauge != nil:
			sum += m.Gauge.GetValue()
		case m.Histogram != nil:
			sum += float64(m.Histogram.GetSampleCount())
		}
	}
	if !found {
		t.Fatalf("/metrics has no %s%v", name, labels)
	}
	return sum
}

func hasLabels(m *dto.Metric, labels []string) bool {
	for i := 0; i+1 < len(labels); i += 2 {
		found := false
		for _, l := range m.Label {
			found = found || (l.GetName() == labels[i] && l.GetValue() == labels[i+1])
		}
		if !found {
			return false
		}
	}
	return true
}
