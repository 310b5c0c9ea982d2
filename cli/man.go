package cli

import (
	"fmt"
	"io"
	"strings"

	"github.com/urfave/cli/v2"
)

func manCommand() *cli.Command {
	return &cli.Command{
		Name:        "man",
		Usage:       "write synapse's man page (section 1, roff) to stdout, made from the commands' own definitions",
		Description: "man synapse reads it once installed: make install puts it in PREFIX/share/man/man1/synapse.1. Full reference: docs/commands.md.",
		Action: func(c *cli.Context) error {
			if c.Args().Present() {
				return usagef("man: no arguments expected; got %q", c.Args().First())
			}
			page, err := manPage()
			if err != nil {
				return err
			}
			_, err = fmt.Fprint(c.App.Writer, page)
			return err
		},
	}
}

// manPage renders the man page in section 1 (urfave/cli writes 8 by
// default, the section of administration commands), from a fresh app: the
// running one has help subcommands added to the command being run.
func manPage() (string, error) {
	page, err := newApp(io.Discard, io.Discard).ToManWithSection(1)
	if err != nil {
		return "", fmt.Errorf("man: %w", err)
	}
	return page, nil
}

func completionCommand() *cli.Command {
	return &cli.Command{
		Name:      "completion",
		Usage:     "print a shell completion script for bash, zsh or fish (of commands and flags, asked of synapse itself)",
		ArgsUsage: "bash|zsh|fish",
		Description: `bash:  source <(synapse completion bash), or install it as PREFIX/share/bash-completion/completions/synapse
zsh:   synapse completion zsh > "${fpath[1]}/_synapse"
fish:  synapse completion fish > ~/.config/fish/completions/synapse.fish
make install puts all three in place. Full reference: docs/commands.md.`,
		Action: func(c *cli.Context) error {
			if c.NArg() != 1 {
				return usagef("completion: give one shell: bash, zsh or fish")
			}
			script, err := completionScript(c.Args().First())
			if err != nil {
				return err
			}
			_, err = fmt.Fprint(c.App.Writer, script)
			return err
		},
	}
}

// completionScript returns the completion script of one shell. The bash and
// zsh scripts ask the binary at each TAB (`synapse embed --generate-bash-completion`,
// which urfave/cli answers with the commands or flags that fit); fish's is
// urfave/cli's static list of commands and flags.
func completionScript(shell string) (string, error) {
	switch shell {
	case "bash":
		return bashCompletion, nil
	case "zsh":
		return zshCompletion, nil
	case "fish":
		s, err := newApp(io.Discard, io.Discard).ToFishCompletion()
		if err != nil {
			return "", fmt.Errorf("completion: fish: %w", err)
		}
		return s, nil
	}
	return "", usagef("completion: unknown shell %q: want bash, zsh or fish", shell)
}

// completionFlag is the flag urfave/cli answers with completions; it must be
// the last argument (flagsFirst leaves such a command line alone).
const completionFlag = "--generate-bash-completion"

// bashCompletion completes the word under the cursor from what synapse
// prints for the words before it; with no suggestion it falls back to file
// names (-o default).
var bashCompletion = strings.ReplaceAll(`# bash completion for synapse (synapse completion bash)
_synapse() {
    local cur=${COMP_WORDS[COMP_CWORD]}
    local -a args=("${COMP_WORDS[@]:1:COMP_CWORD-1}")
    [[ $cur == -* ]] && args+=("$cur")
    local IFS=$'\n'
    COMPREPLY=($(compgen -W "$("${COMP_WORDS[0]}" "${args[@]}" FLAG 2>/dev/null)" -- "$cur"))
}
complete -o bashdefault -o default -F _synapse synapse
`, "FLAG", completionFlag)

// zshCompletion does the same for zsh, as an autoloaded _synapse function.
var zshCompletion = strings.ReplaceAll(`#compdef synapse
# zsh completion for synapse (synapse completion zsh)
_synapse() {
    local -a args opts
    args=("${(@)words[2,CURRENT-1]}")
    [[ ${words[CURRENT]} == -* ]] && args+=("${words[CURRENT]}")
    opts=("${(@f)$("${words[1]}" "${(@)args}" FLAG 2>/dev/null)}")
    if [[ -n ${opts[1]} ]]; then
        compadd -- "${(@)opts}"
    else
        _files
    fi
}
if [[ $zsh_eval_context[-1] == loadautofunc ]]; then
    _synapse "$@"
else
    compdef _synapse synapse
fi
`, "FLAG", completionFlag)
