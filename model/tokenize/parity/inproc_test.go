package parity

import (
	"context"
	"sync"
	"testing"

	"github.com/synapse-embed/synapse/engine"
	"github.com/synapse-embed/synapse/engine/testenv"
)

// The llama.cpp engine in this process, for what a worker cannot show (raw
// invalid UTF-8, which JSON cannot carry) and for timing llama.cpp's
// tokenizer without IPC.
var (
	engOnce sync.Once
	eng     *engine.Llama
	engErr  error
	engRefs sync.Map // target name -> model ref
)

// inProcess loads tg into the process's llama.cpp engine (once) and returns
// the engine and the model ref.
func inProcess(t testing.TB, tg target) (*engine.Llama, string) {
	t.Helper()
	lib := testenv.LlamaLib(t)
	engOnce.Do(func() { eng, engErr = engine.OpenLlama(engine.LlamaOptions{LibDir: lib}) })
	if engErr != nil {
		t.Fatalf("OpenLlama: %v", engErr)
	}
	if ref, ok := engRefs.Load(tg.name); ok {
		return eng, ref.(string)
	}
	info, err := eng.Load(context.Background(), engine.LoadRequest{Path: tg.path, Digest: digest(t, tg.path),
		Format: "gguf", Config: tg.config})
	if err != nil {
		t.Fatalf("engine Load %s: %v", tg.name, err)
	}
	engRefs.Store(tg.name, info.Ref)
	return eng, info.Ref
}
