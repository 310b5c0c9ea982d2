package cli

import (
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/synapse-embed/synapse/engine"
	"github.com/synapse-embed/synapse/wire"
)

func versionCommand() *cli.Command {
	return &cli.Command{
		Name:        "version",
		Usage:       "print synapse's version, its worker protocol version and the llama.cpp and ONNX Runtime libraries it would use",
		Description: "Full reference: docs/commands.md (where the libraries are looked for: docs/engines.md).",
		Flags: []cli.Flag{
			llamaLibFlag(), ortLibFlag(),
		},
		Action: func(c *cli.Context) error {
			printVersion(c.App.Writer, c.String("llama-lib"), c.String("ort-lib"))
			return nil
		},
	}
}

// printVersion writes synapse's version, the protocol version and where the
// llama.cpp and ONNX Runtime libraries are (or why they were not found).
// llamaFlag and ortFlag are --llama-lib's and --ort-lib's values.
func printVersion(w io.Writer, llamaFlag, ortFlag string) {
	fmt.Fprintf(w, "synapse %s\n", version)
	fmt.Fprintf(w, "worker protocol v%d\n", wire.Version)
	if lib, err := findLib(engine.LlamaLib, llamaFlag); err != nil {
		fmt.Fprintln(w, err) // the places searched and how to get the libraries
	} else {
		release, _ := engine.CheckLlamaLib(lib.Path)
		if release == "" {
			release = "release not recorded in the build (taken as " + engine.LlamaRelease + ")"
		}
		fmt.Fprintf(w, "llama.cpp %s in %s (%s)\n", release, lib.Path, lib.Source)
	}
	if lib, err := findLib(engine.ORTLib, ortFlag); err != nil {
		fmt.Fprintln(w, err)
	} else {
		fmt.Fprintf(w, "ONNX Runtime %s in %s (%s)\n", engine.ORTRelease, lib.Path, lib.Source)
	}
}

// rootAction runs when no command is given (help) or the first argument
// names none: that is a usage error that lists the commands.
func rootAction(c *cli.Context) error {
	if !c.Args().Present() {
		return cli.ShowAppHelp(c)
	}
	var names []string
	for _, cmd := range c.App.VisibleCommands() {
		if cmd.Name != "help" {
			names = append(names, cmd.Name)
		}
	}
	sort.Strings(names)
	return usagef("unknown command %q; the commands are %s (synapse --help)", c.Args().First(), strings.Join(names, ", "))
}
