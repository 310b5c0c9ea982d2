package engine

import (
	"bufio"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/synapse-embed/synapse/model/gguf/modelgen"
	"github.com/synapse-embed/synapse/wire"
)

// TestWorkerOOM makes llama.cpp fail a real allocation: a llama model whose
// KV cache for its full context is larger than the machine's memory and
// swap together. The worker must answer ERR{oom} and keep serving. It runs
// in a worker process, so that a machine that grants the allocation after
// all (always-overcommit) costs a worker, not the test binary; it is
// skipped there.
func TestWorkerOOM(t *testing.T) {
	if b, err := os.ReadFile("/proc/sys/vm/overcommit_memory"); err != nil || strings.TrimSpace(string(b)) == "1" {
		t.Skipf("vm.overcommit_memory is %q (%v): a too-large allocation would be granted and then touched", b, err)
	}
	memory := memAndSwap(t)
	// K and V in F16 for 2^20 positions of a 128-wide layer: 512 MiB a layer.
	const ctx, width, perLayer = 1 << 20, 128, int64(1<<20) * 128 * 2 * 2
	layers := int(2*memory/perLayer) + 1
	if layers > 512 {
		t.Skipf("%d GiB of memory and swap: the model would be too large to write", memory>>30)
	}
	path := filepath.Join(t.TempDir(), "huge-context.gguf")
	m := modelgen.Llama{Layers: layers, Width: width, Heads: 2, FFN: 32, Context: ctx, Vocab: modelgen.SPMVocab([]string{"a", "b"})}
	if err := m.Write(path); err != nil {
		t.Fatal(err)
	}
	w := startWorker(t)
	msg := w.call(&wire.Load{ReqID: 1, ArtifactPath: path, ArtifactDigest: fileDigest(t, path), Format: "gguf",
		RuntimeConfig: wire.RuntimeConfig{ContextSize: ctx, Threads: 1}})
	wantErr(t, msg, 1, wire.CodeOOM)
	if e, ok := msg.(*wire.Err); ok && !strings.Contains(e.Msg, "allocate") {
		t.Errorf("oom message %q does not carry llama.cpp's allocation failure", e.Msg)
	}
	if _, ok := w.call(&wire.Ping{ReqID: 2}).(*wire.Pong); !ok {
		t.Fatalf("the worker does not answer PING after the failed load")
	}
	w.load(3, genEmbed, embedConfig) // and still loads models
}

// memAndSwap is MemTotal + SwapTotal from /proc/meminfo, in bytes.
func memAndSwap(t *testing.T) int64 {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		t.Skipf("no /proc/meminfo: %v", err)
	}
	defer f.Close()
	var total int64
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, _ := strings.Cut(sc.Text(), ":")
		if k == "MemTotal" || k == "SwapTotal" {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				t.Fatalf("/proc/meminfo %s: %v", k, err)
			}
			total += kb << 10
		}
	}
	return total
}
