package wire

import (
	"reflect"
	"testing"
)

// TestReaddressed: every request type's copy carries the new req_id and,
// for requests that name a model, the new model_ref (or the old one when
// none is given), and the caller's message is left as it was.
func TestReaddressed(t *testing.T) {
	const (
		callerID  = 3
		workerID  = 41
		callerRef = "m-caller"
		workerRef = "m-worker"
	)
	requests := []Request{
		&Load{ReqID: callerID, ArtifactPath: "a.gguf"},
		&Quantize{ReqID: callerID},
		&Ping{ReqID: callerID},
		&EmbedBatch{ReqID: callerID, ModelRef: callerRef, IDs: []int32{1, 2}},
		&Rerank{ReqID: callerID, ModelRef: callerRef},
		&RerankGroups{ReqID: callerID, ModelRef: callerRef},
		&Generate{ReqID: callerID, ModelRef: callerRef},
		&Unload{ReqID: callerID, ModelRef: callerRef},
		&Tokenize{ReqID: callerID, ModelRef: callerRef},
	}
	for _, req := range requests {
		t.Run(string(req.Type()), func(t *testing.T) {
			before := reflect.ValueOf(req).Elem().Interface()
			for _, tc := range []struct{ ref, wantRef string }{{workerRef, workerRef}, {"", callerRef}} {
				got := req.Readdressed(workerID, tc.ref)
				if got.Type() != req.Type() || got.RequestID() != workerID {
					t.Errorf("Readdressed(%d, %q): %s with req_id %d; want %s with %d", workerID, tc.ref, got.Type(), got.RequestID(), req.Type(), workerID)
				}
				if mr, ok := got.(ModelRequest); ok && mr.NamedModel() != tc.wantRef {
					t.Errorf("Readdressed(%d, %q): model_ref %q; want %q", workerID, tc.ref, mr.NamedModel(), tc.wantRef)
				}
			}
			if after := reflect.ValueOf(req).Elem().Interface(); !reflect.DeepEqual(after, before) {
				t.Errorf("the caller's request changed: %+v; was %+v", after, before)
			}
		})
	}
}

// TestSetRequestID: every reply type takes the caller's req_id.
func TestSetRequestID(t *testing.T) {
	const callerID = 9
	for _, r := range []Reply{&Loaded{}, &Vectors{}, &Scores{}, &Text{}, &Unloaded{}, &Pong{}, &Tokens{}, &Quantized{}} {
		r.SetRequestID(callerID)
		if r.RequestID() != callerID {
			t.Errorf("%s: req_id %d after SetRequestID(%d)", r.Type(), r.RequestID(), callerID)
		}
	}
}
