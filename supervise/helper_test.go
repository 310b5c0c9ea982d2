package supervise

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/synapse-embed/synapse/wire"
)

// helperEnv selects the behaviour of the test binary re-run as a worker
// (or as a module) by TestHelperProcess.
const helperEnv = "SUPERVISE_HELPER"

// helperCommand runs this test binary as a helper process.
func helperCommand() []string {
	return []string{os.Args[0], "-test.run=^TestHelperProcess$", "--"}
}

// TestHelperProcess is not a test: it is the body of the helper worker
// processes (and the helper module) when helperEnv is set.
func TestHelperProcess(t *testing.T) {
	mode := os.Getenv(helperEnv)
	if mode == "" {
		t.Skip("helper process body; runs only as a child")
	}
	args := flagArgs(os.Args)
	if mode == "module" {
		os.Exit(helperModule())
	}
	os.Exit(helperWorker(mode, args["--socket"], args["--nonce"]))
}

// flagArgs reads "--name value" pairs after the first "--".
func flagArgs(argv []string) map[string]string {
	out := map[string]string{}
	for i, a := range argv {
		if a == "--" {
			argv = argv[i+1:]
			break
		}
	}
	for i := 0; i+1 < len(argv); i += 2 {
		out[argv[i]] = argv[i+1]
	}
	return out
}

// chaos is the SYNAPSE_CHAOS drill set the real worker understands:
// abort-on-token=ID, hang-on-token=ID, exit-after=N, delay=D, separated by
// commas.
type chaos struct {
	abortOn, hangOn int32
	hasAbort        bool
	hasHang         bool
	exitAfter       int
	delay           time.Duration
}

func parseChaos(s string) chaos {
	var c chaos
	for _, kv := range strings.Split(s, ",") {
		k, v, _ := strings.Cut(strings.TrimSpace(kv), "=")
		n, _ := strconv.Atoi(v)
		switch k {
		case "abort-on-token":
			c.abortOn, c.hasAbort = int32(n), true
		case "hang-on-token":
			c.hangOn, c.hasHang = int32(n), true
		case "exit-after":
			c.exitAfter = n
		case "delay":
			c.delay, _ = time.ParseDuration(v)
		}
	}
	return c
}

// helperHang blocks until killed.
func helperHang() {
	for {
		time.Sleep(time.Hour)
	}
}

// helperWorker speaks protocol v1 on socket, misbehaving as mode says.
func helperWorker(mode, socket, nonce string) int {
	if mode == "slow-start" {
		helperHang()
	}
	if mode == "once" { // starts once; every later start fails
		marker := socket + ".started"
		if _, err := os.Stat(marker); err == nil {
			fmt.Fprintln(os.Stderr, "helper: refusing to start twice")
			return 1
		}
		os.WriteFile(marker, nil, 0o600)
	}
	if mode == "flood" { // before HELLO: a module that does not drain never sees it
		w := bufio.NewWriterSize(os.Stderr, 64<<10)
		line := strings.Repeat("x", 120)
		for i := range 64 << 10 { // ~8 MiB
			fmt.Fprintf(w, "flood %d %s\n", i, line)
		}
		w.Flush()
		fmt.Fprintln(os.Stderr, "flood done")
	}
	fmt.Fprintf(os.Stdout, "helper worker %s up\n", os.Getenv("SYNAPSE_WORKER_ID"))
	nc, err := net.Dial("unix", socket)
	if err != nil {
		fmt.Fprintln(os.Stderr, "dial:", err)
		return 1
	}
	conn := wire.NewConn(nc)
	if done, code := helperHello(mode, nc, conn, nonce); done {
		return code
	}
	if _, err := conn.Recv(); err != nil { // HELLO_ACK
		return 1
	}
	return helperServe(conn, parseChaos(os.Getenv("SYNAPSE_CHAOS")), os.Getenv("SUPERVISE_STICKY") != "")
}

// helperHello sends the first frame; done reports a mode that stops there.
func helperHello(mode string, nc net.Conn, conn *wire.Conn, nonce string) (done bool, code int) {
	hello := &wire.Hello{V: wire.Version, Nonce: nonce, PID: os.Getpid(), MaxFrame: 1 << 20,
		Engine: wire.EngineInfo{Name: "helper", Version: "0"}}
	switch mode {
	case "wrong-nonce":
		hello.Nonce = strings.Repeat("0", 32)
	case "wrong-version":
		hello.V = 2
	case "request-first":
		conn.Send(&wire.Ping{ReqID: 1})
		return true, helperAwaitClose(conn)
	case "garbage":
		wire.WriteFrame(nc, []byte("\x00\x01 this is not json"))
		return true, helperAwaitClose(conn)
	case "oversize":
		nc.Write([]byte{0xf0, 0xff, 0xff, 0xff})
		return true, helperAwaitClose(conn)
	}
	if err := conn.Send(hello); err != nil {
		return true, 1
	}
	if mode == "wrong-nonce" || mode == "wrong-version" {
		return true, helperAwaitClose(conn)
	}
	return false, 0
}

// helperAwaitClose waits for the module to close the socket, then exits 0:
// only the module's kill or close ends a misbehaving helper.
func helperAwaitClose(conn *wire.Conn) int {
	for {
		if _, err := conn.Recv(); err != nil {
			var ue *wire.UnknownTypeError
			if errors.As(err, &ue) {
				continue
			}
			helperHang() // the module must kill us
		}
	}
}

// helperServe answers requests until SHUTDOWN or EOF.
func helperServe(conn *wire.Conn, c chaos, sticky bool) int {
	var models []string
	for n := 1; ; n++ {
		m, err := conn.Recv()
		if err != nil {
			if errors.Is(err, io.EOF) && !sticky {
				return 0
			}
			helperHang()
		}
		if _, ok := m.(*wire.Shutdown); ok {
			fmt.Fprintln(os.Stderr, "helper: shutdown")
			if sticky {
				helperHang() // ignores SHUTDOWN
			}
			return 0
		}
		if c.exitAfter > 0 && n > c.exitAfter {
			fmt.Fprintf(os.Stderr, "helper: exit after %d requests\n", c.exitAfter)
			return 3
		}
		if c.delay > 0 {
			time.Sleep(c.delay)
		}
		resp := helperAnswer(m, c, &models)
		if err := conn.Send(resp); err != nil {
			return 1
		}
	}
}

// helperAnswer computes the answer to one request.
func helperAnswer(m wire.Message, c chaos, models *[]string) wire.Message {
	switch m := m.(type) {
	case *wire.Load:
		if m.ArtifactPath == "missing" {
			return &wire.Err{ReqID: m.ReqID, Code: wire.CodeArtifactInvalid, Msg: "no such file"}
		}
		ref := "helper:" + m.ArtifactDigest
		*models = append(*models, ref)
		return &wire.Loaded{ReqID: m.ReqID, ModelRef: ref, Dims: 2, ColdLoadMS: 1}
	case *wire.EmbedBatch:
		for _, id := range m.IDs {
			if c.hasAbort && id == c.abortOn {
				helperAbort(fmt.Sprintf("token %d", id))
			}
			if c.hasHang && id == c.hangOn {
				fmt.Fprintf(os.Stderr, "helper: hanging on token %d\n", id)
				helperHang()
			}
		}
		v := &wire.Vectors{ReqID: m.ReqID, Dims: 2, N: len(m.Items)}
		off := 0
		for _, it := range m.Items {
			var sum int32
			for _, id := range m.IDs[off : off+it.NTokens] {
				sum += id
			}
			off += it.NTokens
			v.Data = append(v.Data, float32(it.NTokens), float32(sum))
		}
		return v
	case *wire.Ping:
		return &wire.Pong{ReqID: m.ReqID, RSSMB: 7, ModelsLoaded: *models}
	case *wire.Quantize:
		return helperQuantize(m)
	}
	return &wire.Err{ReqID: requestID(m), Code: wire.CodeUnknownType, Msg: "helper: " + string(m.Type())}
}

// helperQuantize answers QUANTIZE, or behaves as its ftype says: "abort"
// dies by SIGABRT, "hang" never answers, "old" answers as a worker without
// the extension does (unknown_type).
func helperQuantize(m *wire.Quantize) wire.Message {
	switch m.FType {
	case "abort":
		helperAbort("quantize")
	case "hang":
		fmt.Fprintln(os.Stderr, "helper: hanging in quantize")
		helperHang()
	case "old":
		return &wire.Err{ReqID: m.ReqID, Code: wire.CodeUnknownType, Msg: `unknown message type "QUANTIZE"`}
	}
	return &wire.Quantized{ReqID: m.ReqID, OutDigest: "sha256:" + m.FType, OutSize: int64(len(m.OutPath)), MS: 1}
}

// helperModule is a module process: it starts a pool of one sticky helper
// worker in $SUPERVISE_RUNTIME, prints the worker's pid and waits to be
// killed.
func helperModule() int {
	p, err := NewPool(context.Background(), Config{
		Command:      helperCommand(),
		Env:          []string{helperEnv + "=worker", "SUPERVISE_STICKY=1", "GORACE=atexit_sleep_ms=0"},
		RuntimeDir:   os.Getenv("SUPERVISE_RUNTIME"),
		PingInterval: -1,
	})
	if err != nil {
		fmt.Println("error:", err)
		return 1
	}
	fmt.Println(p.Health().Workers[0].PID)
	helperHang()
	return 0
}
