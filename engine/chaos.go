package engine

import (
	"fmt"
	"runtime/debug"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/ebitengine/purego"
)

// Chaos holds the fault drills a worker runs when SYNAPSE_CHAOS asks for
// them (see ParseChaos). The zero value runs none.
type Chaos struct {
	AbortOnToken *int32        // abort (SIGABRT, like a GGML_ASSERT) when a request's ids hold this token
	HangOnToken  *int32        // block forever when a request's ids hold this token
	AbortOnType  string        // abort on a request of this type ("QUANTIZE"); "" never
	HangOnType   string        // block forever on a request of this type; "" never
	ExitAfter    int           // exit(1) after this many requests have been answered (0: never)
	Delay        time.Duration // sleep this long before each request
	// OldWorker plays a worker from before the extensions: it announces
	// none in HELLO and answers extension requests with unknown_type.
	OldWorker bool
}

// ParseChaos parses SYNAPSE_CHAOS: comma-separated drills
//
//	abort-on-token=ID   abort the process (SIGABRT) on a request whose ids hold ID
//	hang-on-token=ID    block forever on a request whose ids hold ID
//	abort-on-type=TYPE  abort the process on a request of TYPE (e.g. QUANTIZE, LOAD)
//	hang-on-type=TYPE   block forever on a request of TYPE
//	exit-after=N        exit with status 1 after answering N requests
//	delay=DURATION      sleep DURATION (time.ParseDuration) before each request
//	old-worker=1        announce no extensions in HELLO (RERANK_GROUPS, GENERATE.sampling)
//	                    and answer RERANK_GROUPS with unknown_type, as an older worker would
//
// An empty string runs no drill.
func ParseChaos(s string) (Chaos, error) {
	var c Chaos
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		k, v, ok := strings.Cut(f, "=")
		if !ok {
			return Chaos{}, fmt.Errorf("engine: SYNAPSE_CHAOS %q: want name=value", f)
		}
		if err := c.set(k, v); err != nil {
			return Chaos{}, fmt.Errorf("engine: SYNAPSE_CHAOS %s: %w", k, err)
		}
	}
	return c, nil
}

func (c *Chaos) set(k, v string) error {
	switch k {
	case "abort-on-token", "hang-on-token":
		n, err := strconv.ParseInt(v, 10, 32)
		if err != nil {
			return err
		}
		tok := int32(n)
		if k == "abort-on-token" {
			c.AbortOnToken = &tok
		} else {
			c.HangOnToken = &tok
		}
	case "abort-on-type", "hang-on-type":
		if v == "" || strings.Trim(v, "ABCDEFGHIJKLMNOPQRSTUVWXYZ_") != "" {
			return fmt.Errorf("%q: want a message type such as QUANTIZE", v)
		}
		if k == "abort-on-type" {
			c.AbortOnType = v
		} else {
			c.HangOnType = v
		}
	case "exit-after":
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return fmt.Errorf("%q: want a count ≥ 1", v)
		}
		c.ExitAfter = n
	case "delay":
		d, err := time.ParseDuration(v)
		if err != nil || d < 0 {
			return fmt.Errorf("%q: want a duration ≥ 0", v)
		}
		c.Delay = d
	case "old-worker":
		if v != "1" {
			return fmt.Errorf("%q: want 1", v)
		}
		c.OldWorker = true
	default:
		return fmt.Errorf("unknown drill (want abort-on-token, hang-on-token, abort-on-type, hang-on-type, exit-after, delay or old-worker)")
	}
	return nil
}

// Active reports whether any drill is set.
func (c Chaos) Active() bool {
	return c.AbortOnToken != nil || c.HangOnToken != nil || c.AbortOnType != "" || c.HangOnType != "" ||
		c.ExitAfter > 0 || c.Delay > 0 || c.OldWorker
}

func (c Chaos) String() string {
	var parts []string
	if c.AbortOnToken != nil {
		parts = append(parts, fmt.Sprintf("abort-on-token=%d", *c.AbortOnToken))
	}
	if c.HangOnToken != nil {
		parts = append(parts, fmt.Sprintf("hang-on-token=%d", *c.HangOnToken))
	}
	if c.AbortOnType != "" {
		parts = append(parts, "abort-on-type="+c.AbortOnType)
	}
	if c.HangOnType != "" {
		parts = append(parts, "hang-on-type="+c.HangOnType)
	}
	if c.ExitAfter > 0 {
		parts = append(parts, fmt.Sprintf("exit-after=%d", c.ExitAfter))
	}
	if c.Delay > 0 {
		parts = append(parts, "delay="+c.Delay.String())
	}
	if c.OldWorker {
		parts = append(parts, "old-worker=1")
	}
	return strings.Join(parts, ",")
}

func holds(ids []int32, tok *int32) bool {
	if tok == nil {
		return false
	}
	for _, id := range ids {
		if id == *tok {
			return true
		}
	}
	return false
}

// Abort ends the process the way a failed GGML_ASSERT does: libc abort(),
// so the parent sees SIGABRT. SIGABRT's disposition is reset to the default
// first: with Go's handler in place the runtime would print every
// goroutine's stack and relay SIGQUIT between threads before dying, and a
// thread Go does not own (ONNX Runtime's, in a cgo binary) can then take
// the SIGQUIT and end the process by it instead.
func Abort() {
	debug.SetTraceback("crash") // should the reset fail: die by the signal, not exit 2
	if libc, err := purego.Dlopen("libc.so.6", purego.RTLD_NOW|purego.RTLD_GLOBAL); err == nil {
		if fn, err := purego.Dlsym(libc, "signal"); err == nil {
			purego.SyscallN(fn, uintptr(syscall.SIGABRT), 0) // SIG_DFL
		}
		if fn, err := purego.Dlsym(libc, "abort"); err == nil {
			purego.SyscallN(fn)
		}
	}
	syscall.Kill(syscall.Getpid(), syscall.SIGABRT)
	Hang() // the signal is on its way
}

// Hang blocks the calling goroutine forever (the hang-on-token drill).
func Hang() {
	for {
		time.Sleep(time.Hour)
	}
}
