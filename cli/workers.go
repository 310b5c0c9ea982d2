package cli

import (
	"fmt"
	"os"

	"github.com/urfave/cli/v2"

	"github.com/synapse-embed/synapse/engine"
	"github.com/synapse-embed/synapse/engine/libpath"
	"github.com/synapse-embed/synapse/model/artifact"
)

// How this process starts workers, and the flags that say it: the worker
// command, the engine library each model format needs, and the chaos
// drills, decided here for every command that starts workers (embed,
// rerank, generate, models add).

// libDefaultText is where a library is looked for without its flag.
const libDefaultText = "beside the binary, in $XDG_DATA_HOME or the checkout's .cache (see docs/engines.md)"

// llamaLibFlag is --llama-lib, the directory of llama.cpp's libraries.
func llamaLibFlag() cli.Flag {
	return &cli.StringFlag{Name: "llama-lib", Usage: "`DIR` of llama.cpp's shared libraries (GGUF models)",
		DefaultText: libDefaultText, EnvVars: []string{engine.LlamaLib.Env}}
}

// ortLibFlag is --ort-lib, ONNX Runtime's library or its directory.
func ortLibFlag() cli.Flag {
	return &cli.StringFlag{Name: "ort-lib", Usage: "`DIR` of ONNX Runtime's libonnxruntime.so.1, or the file (ONNX models)",
		DefaultText: libDefaultText, EnvVars: []string{engine.ORTLib.Env}}
}

// chaosFlag is the hidden --chaos: the workers' fault drills.
func chaosFlag() cli.Flag {
	return &cli.StringFlag{Name: "chaos", Hidden: true, Usage: "arm the workers' fault drills (SYNAPSE_CHAOS syntax; for tests and drills only)"}
}

// checkChaos refuses a --chaos the workers could not parse.
func checkChaos(c *cli.Context, name string) error {
	if s := c.String("chaos"); s != "" {
		if _, err := engine.ParseChaos(s); err != nil {
			return usageError{fmt.Errorf("%s: --chaos: %w", name, err)}
		}
	}
	return nil
}

// workerSetup is how a command starts its workers.
type workerSetup struct {
	command []string // this executable and "worker"; the pool adds --socket and --nonce
	env     []string // the engine library's variable (SYNAPSE_LLAMA_LIB=…, SYNAPSE_ORT_LIB=…)
	chaos   string   // the drills armed (--chaos), "" for none
}

// workersFor finds this executable and the library the workers' engine
// needs for a model of format (artifact.FormatGGUF: llama.cpp, --llama-lib;
// FormatONNX: ONNX Runtime, --ort-lib) before any worker starts, so that a
// missing library is reported as such, with the places searched and how to
// get it, instead of as workers that die at start.
func workersFor(c *cli.Context, format string) (workerSetup, error) {
	self, err := os.Executable()
	if err != nil {
		return workerSetup{}, fmt.Errorf("find the synapse executable for workers: %w", err)
	}
	lib, flag := engine.LlamaLib, c.String("llama-lib")
	if format == artifact.FormatONNX {
		lib, flag = engine.ORTLib, c.String("ort-lib")
	}
	place, err := findLib(lib, flag)
	if err != nil {
		return workerSetup{}, err
	}
	return workerSetup{command: []string{self, "worker"}, env: []string{lib.Env + "=" + place.Path}, chaos: c.String("chaos")}, nil
}

// findLib finds a native library in libpath's search order; flag is the
// value of the library's flag (which the CLI also fills from its
// environment variable).
func findLib(lib libpath.Lib, flag string) (libpath.Place, error) {
	return lib.Find(libpath.ProcessEnv(flag))
}
