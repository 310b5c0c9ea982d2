package cli

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/schollz/progressbar/v3"
	"github.com/urfave/cli/v2"
	"golang.org/x/term"

	"github.com/synapse-embed/synapse/io/files"
	"github.com/synapse-embed/synapse/model/hub"
	"github.com/synapse-embed/synapse/model/modelcache"
)

func modelsPullCommand() *cli.Command {
	return &cli.Command{
		Name:      "pull",
		Usage:     "fetch a model from the Hugging Face Hub by its id (only the files a load needs, each checked, resumable) into the model cache",
		ArgsUsage: "ORG/NAME[@REVISION]",
		Description: `The revision (a branch, tag or commit; default main) is resolved once, by
the Hub's model API, to a commit, and every file is downloaded from that
commit. Taken: config.json, tokenizer.json, tokenizer_config.json,
special_tokens_map.json, vocab.txt, modules.json, sentence_bert_config.json,
config_sentence_transformers.json, the files of the sentence-transformers
module directories modules.json names (1_Pooling, 2_Dense, …), and the
weights: model.safetensors (or its shards), or with --onnx the ONNX export
(onnx/model.onnx). pytorch_model.bin (a pickle) is never fetched; a model
that has only that is refused.

Each file is checked against the size and sha256 (LFS files) or git blob id
the API announced; a dropped connection is resumed where it stopped (HTTP
Range), in this run or the next. The files land, complete, in the model
cache's hub/ directory in the Hugging Face cache's layout
(hub/models--ORG--NAME/snapshots/COMMIT/), and -m ORG/NAME[@REVISION] then
resolves to them. Pulling a commit already there downloads nothing.

The endpoint is $HF_ENDPOINT (a mirror), else the Hub; HF_TOKEN is sent as a
bearer token (gated or private models) to the endpoint's host only.

Exit status: 0 pulled (or there already); 2 the model, revision or access
is refused, nothing loadable, a file failing its checksum; 1 the network
failed after --attempts tries (run again: it resumes); 130 interrupted.

Full reference: docs/models.md.`,
		Flags: []cli.Flag{
			&cli.BoolFlag{Name: "onnx", Usage: "fetch the ONNX export (onnx/model.onnx) instead of model.safetensors"},
			&cli.StringFlag{Name: "endpoint", Usage: "the Hub's `URL`, or a mirror's", EnvVars: []string{"HF_ENDPOINT"}, DefaultText: hub.DefaultEndpoint},
			&cli.IntFlag{Name: "attempts", Value: 5, Usage: "tries of each request before a network failure is given up on (waiting 1s, 2s, 4s, … between)"},
			modelsDirFlag(),
		},
		Action: modelsPull,
	}
}

// checkPullArgs checks models pull's argument and flags before any network
// call.
func checkPullArgs(c *cli.Context) (hub.Ref, *hub.Client, error) {
	if c.NArg() != 1 {
		return hub.Ref{}, nil, usagef("models pull: want one ORG/NAME[@REVISION] argument, got %d", c.NArg())
	}
	r, err := hub.ParseRef(c.Args().First())
	if err != nil {
		return hub.Ref{}, nil, usageError{fmt.Errorf("models pull: %w", err)}
	}
	if c.Int("attempts") < 1 {
		return hub.Ref{}, nil, usagef("models pull: --attempts %d: want at least 1", c.Int("attempts"))
	}
	cl, err := hub.NewClient(c.String("endpoint"))
	if err != nil {
		return hub.Ref{}, nil, usageError{fmt.Errorf("models pull: %w", err)}
	}
	cl.Attempts, cl.Agent = c.Int("attempts"), "synapse/"+version
	return r, cl, nil
}

func modelsPull(c *cli.Context) error {
	r, cl, err := checkPullArgs(c)
	if err != nil {
		return err
	}
	s, err := openStore(c)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(hub.StoreDir(s), 0o755); err != nil { // before the network: a cache it cannot write to
		return usageError{fmt.Errorf("models pull: the model cache: %w", err)}
	}
	stderr := c.App.ErrWriter
	prog := newPullProgress(stderr)
	cl.Log = prog.log
	p, err := cl.Pull(c.Context, s, r, hub.PullOptions{ONNX: c.Bool("onnx"), Progress: prog.update})
	prog.finish()
	if errors.Is(err, files.ErrUntrusted) {
		return fmt.Errorf("models pull: %w; remove it (`synapse models rm %s`) or use a model cache of your own (set %s)", err, r.ID, modelcache.EnvDir)
	}
	if err != nil {
		return pullError(err)
	}
	verb := "pulled"
	if p.Fetched == 0 {
		verb = "cached"
	}
	fmt.Fprintf(c.App.Writer, "%-9s %s  commit %s  %d files, %s (%d fetched now)  %s\n",
		verb, r, p.Commit, len(p.Files), hub.Bytes(p.Bytes), p.Fetched, p.Dir)
	return nil
}

// pullError marks what running again unchanged cannot mend as a usage
// error (exit 2): refused access, no such model, revision or file, nothing
// loadable, a checksum mismatch, an answer that is not the Hub's, a
// repository file that cannot be used (modules.json naming a module
// outside the repository). A network
// failure stays exit 1: the next pull resumes.
func pullError(err error) error {
	for _, perm := range []error{hub.ErrAuth, hub.ErrRemoteNotFound, hub.ErrNothingToLoad, hub.ErrChecksum, hub.ErrProtocol, hub.ErrBadRepo} {
		if errors.Is(err, perm) {
			return usageError{fmt.Errorf("models pull: %w", err)}
		}
	}
	return fmt.Errorf("models pull: %w", err)
}

// pullProgress shows a pull: what it waits on, a line each; a bar per file
// on a terminal, elsewhere a line every few seconds for a long download.
type pullProgress struct {
	w   io.Writer
	tty bool

	mu     sync.Mutex
	bar    *progressbar.ProgressBar
	name   string
	logged time.Time
}

func newPullProgress(w io.Writer) *pullProgress {
	p := &pullProgress{w: w}
	if f, ok := w.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		p.tty = true
	}
	return p
}

func (p *pullProgress) log(line string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.endBar()
	fmt.Fprintf(p.w, "synapse: %s\n", scrubSecrets(line))
	p.logged = time.Now() // a download's first progress line comes a while after its start
}

func (p *pullProgress) update(name string, done, size int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.tty {
		if done < size && time.Since(p.logged) >= 5*time.Second {
			fmt.Fprintf(p.w, "synapse: %s: %s of %s\n", name, hub.Bytes(done), hub.Bytes(size))
			p.logged = time.Now()
		}
		return
	}
	if p.bar == nil || p.name != name {
		p.endBar()
		p.name = name
		p.bar = progressbar.NewOptions64(size, progressbar.OptionSetWriter(p.w), progressbar.OptionSetDescription(name),
			progressbar.OptionShowBytes(true), progressbar.OptionShowCount(), progressbar.OptionThrottle(200*time.Millisecond),
			progressbar.OptionClearOnFinish())
	}
	p.bar.Set64(done)
}

// endBar ends the current bar; call with mu held.
func (p *pullProgress) endBar() {
	if p.bar != nil {
		p.bar.Finish()
		p.bar = nil
	}
}

func (p *pullProgress) finish() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.endBar()
}

// printPulled lists the models pulled into the model cache (hub/), after
// its entries.
func printPulled(w io.Writer, s *modelcache.Store) error {
	pulled, err := hub.List(hub.StoreDir(s))
	if err != nil {
		return fmt.Errorf("models ls: %w", err)
	}
	if len(pulled) == 0 {
		return nil
	}
	fmt.Fprintf(w, "\npulled from the Hugging Face Hub (%s):\n", hub.StoreDir(s))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tCOMMIT\tREFS\tFILES\tSIZE")
	for _, p := range pulled {
		refs := strings.Join(p.Refs, ",")
		if refs == "" {
			refs = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\n", p.ID, p.Commit[:12], refs, p.Files, hub.Bytes(p.Bytes))
	}
	return tw.Flush()
}

// removePulled removes the pulled model ref names (every commit of it),
// when ref is a hub id the model cache has no entry for (lookupErr is
// ErrNotFound) or holds a '/'; removed says it did.
func removePulled(c *cli.Context, s *modelcache.Store, ref string, lookupErr error) (removed bool, err error) {
	r, perr := hub.ParseRef(ref)
	if perr != nil || r.Revision != "" || (lookupErr == nil && !strings.Contains(ref, "/")) ||
		(lookupErr != nil && !errors.Is(lookupErr, modelcache.ErrNotFound)) {
		return false, nil
	}
	folder := filepath.Join(hub.StoreDir(s), r.Folder())
	if _, err := os.Lstat(folder); err != nil {
		if strings.Contains(ref, "/") {
			return false, usagef("models rm: %s: not pulled into %s", ref, hub.StoreDir(s))
		}
		return false, nil
	}
	unlock, err := s.LockKey(c.Context, "hub-"+r.Folder(), func() {
		fmt.Fprintf(c.App.ErrWriter, "synapse: waiting for another synapse that is pulling %s\n", r.ID)
	})
	if err != nil {
		return false, fmt.Errorf("models rm: %w", err)
	}
	defer unlock()
	if err := hub.Remove(hub.StoreDir(s), r); err != nil {
		return false, fmt.Errorf("models rm: %w", err)
	}
	fmt.Fprintf(c.App.Writer, "removed %s (pulled, from %s)\n", r.ID, folder)
	return true, nil
}
