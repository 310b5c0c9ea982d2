package cli

import (
	"bytes"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/yaml"
)

// The examples in examples/slurm and examples/k8s are checked here without a
// cluster: every Kubernetes manifest decodes strictly into the k8s.io/api
// types (no unknown or misspelt field), the Jobs carry the exit-code policy
// the README describes, and every synapse command in a manifest, a script
// or an example README uses flags that its subcommand has. slurm_test.go runs
// the Slurm examples for real.

// k8sObject returns an empty object of the manifest's kind.
func k8sObject(apiVersion, kind string) (any, error) {
	switch apiVersion + " " + kind {
	case "v1 PersistentVolumeClaim":
		return &corev1.PersistentVolumeClaim{}, nil
	case "v1 ServiceAccount":
		return &corev1.ServiceAccount{}, nil
	case "batch/v1 Job":
		return &batchv1.Job{}, nil
	case "batch/v1 CronJob":
		return &batchv1.CronJob{}, nil
	case "rbac.authorization.k8s.io/v1 Role":
		return &rbacv1.Role{}, nil
	case "rbac.authorization.k8s.io/v1 RoleBinding":
		return &rbacv1.RoleBinding{}, nil
	}
	return nil, fmt.Errorf("kind %q of %q: not one the examples use", kind, apiVersion)
}

// decodeManifests strictly decodes every document of a YAML file.
func decodeManifests(data []byte) ([]any, error) {
	var objs []any
	for i, doc := range regexp.MustCompile(`(?m)^---\s*$`).Split(string(data), -1) {
		if strings.TrimSpace(doc) == "" {
			continue
		}
		var meta struct{ APIVersion, Kind string }
		if err := yaml.Unmarshal([]byte(doc), &meta); err != nil {
			return nil, fmt.Errorf("document %d: %w", i+1, err)
		}
		obj, err := k8sObject(meta.APIVersion, meta.Kind)
		if err != nil {
			return nil, fmt.Errorf("document %d: %w", i+1, err)
		}
		if err := yaml.UnmarshalStrict([]byte(doc), obj); err != nil {
			return nil, fmt.Errorf("document %d (%s): %w", i+1, meta.Kind, err)
		}
		objs = append(objs, obj)
	}
	return objs, nil
}

// podSpecs returns the pod templates of Jobs and CronJobs.
func podSpecs(obj any) []corev1.PodSpec {
	switch o := obj.(type) {
	case *batchv1.Job:
		return []corev1.PodSpec{o.Spec.Template.Spec}
	case *batchv1.CronJob:
		return []corev1.PodSpec{o.Spec.JobTemplate.Spec.Template.Spec}
	}
	return nil
}

// containerCommands returns a container's commands as lists of words: its
// command and args when the command is synapse, or the commands of its
// shell script when it runs `sh -c SCRIPT`.
func containerCommands(c corev1.Container) [][]string {
	argv := append(append([]string(nil), c.Command...), c.Args...)
	if len(argv) >= 3 && slices.Contains([]string{"sh", "bash"}, filepath.Base(argv[0])) && argv[1] == "-c" {
		return shellCommands(argv[2])
	}
	return [][]string{argv}
}

// shellCommands splits a shell script into simple commands, each a list of
// words with the quotes removed: enough of sh to find the commands in the
// examples (no expansions; a `$(` or `((` starts a new command).
func shellCommands(script string) [][]string {
	var cmds [][]string
	var cmd []string
	var word strings.Builder
	inWord := false
	depth := 0 // open parentheses: subshells and command substitutions
	endWord := func() {
		if inWord {
			cmd = append(cmd, word.String())
			word.Reset()
			inWord = false
		}
	}
	endCmd := func() {
		endWord()
		if len(cmd) > 0 {
			cmds = append(cmds, cmd)
			cmd = nil
		}
	}
	for i := 0; i < len(script); i++ {
		switch r := script[i]; {
		case r == '\\' && i+1 < len(script):
			i++
			if script[i] != '\n' {
				word.WriteByte(script[i])
				inWord = true
			}
		case r == '\'' || r == '"':
			j := i + 1
			for j < len(script) && script[j] != r {
				if r == '"' && script[j] == '\\' {
					j++
				}
				j++
			}
			word.WriteString(script[i+1 : min(j, len(script))])
			inWord, i = true, j
		case r == '#' && !inWord:
			for i+1 < len(script) && script[i+1] != '\n' {
				i++
			}
		case r == ')' && depth == 0:
			// A `)` that closes no `(` ends a case pattern: its words
			// are no command.
			word.Reset()
			inWord, cmd = false, nil
		case strings.IndexByte("\n;|&()", r) >= 0:
			depth += strings.Count("(", string(r)) - strings.Count(")", string(r))
			endCmd()
		case r == ' ' || r == '\t':
			endWord()
		default:
			word.WriteByte(r)
			inWord = true
		}
	}
	endCmd()
	return cmds
}

// synapseWord matches a word that runs synapse: synapse, a path to it, or a
// variable holding it ($synapse, ${SYNAPSE}).
var synapseWord = regexp.MustCompile(`(?i)^(\$\{?synapse\}?|(.*/)?synapse)$`)

// assignment matches a word that sets a variable for the command after it.
var assignment = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*=`)

// synapseCall returns the words after `synapse` when cmd runs synapse
// (after variable assignments and exec), else nil.
func synapseCall(cmd []string) []string {
	for i, w := range cmd {
		switch {
		case w == "exec" || w == "time" || assignment.MatchString(w):
			continue
		case synapseWord.MatchString(w):
			return cmd[i+1:]
		}
		return nil
	}
	return nil
}

// checkFlags reports an error unless args (the words after `synapse`) name a
// subcommand and use only flags that it has.
func checkFlags(app *cli.App, args []string) error {
	if len(args) == 0 {
		return fmt.Errorf("synapse without a command")
	}
	cmd := app.Command(args[0])
	if cmd == nil {
		return fmt.Errorf("synapse %s: no such command", args[0])
	}
	name, rest := "synapse "+cmd.Name, args[1:]
	for _, sub := range cmd.Subcommands {
		if len(rest) > 0 && sub.HasName(rest[0]) {
			cmd, name, rest = sub, name+" "+sub.Name, rest[1:]
		}
	}
	flags := map[string]cli.Flag{"help": cli.HelpFlag, "h": cli.HelpFlag}
	for _, f := range cmd.Flags {
		for _, n := range f.Names() {
			flags[n] = f
		}
	}
	for i := 0; i < len(rest); i++ {
		w := rest[i]
		if w == "--" {
			break
		}
		if len(w) < 2 || w[0] != '-' {
			continue
		}
		n, _, hasValue := strings.Cut(strings.TrimLeft(w, "-"), "=")
		f, ok := flags[n]
		if !ok {
			return fmt.Errorf("%s: no flag %s", name, w)
		}
		if _, isBool := f.(*cli.BoolFlag); !isBool && !hasValue {
			i++ // its value
		}
	}
	return nil
}

// exampleCalls returns the synapse commands of every example: Kubernetes
// manifests, Slurm scripts and the code blocks of the examples' READMEs,
// by file (relative to examples/).
func exampleCalls(t *testing.T) map[string][][]string {
	t.Helper()
	calls := map[string][][]string{}
	var files []string
	err := filepath.WalkDir(repoPath("examples"), func(path string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() && filepath.Dir(path) != repoPath("examples") {
			files = append(files, path)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, path := range files {
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(repoPath("examples"), path)
		var cmds [][]string
		switch {
		case strings.HasSuffix(path, ".yaml"):
			objs, err := decodeManifests(data)
			if err != nil {
				t.Fatalf("%s: %v", path, err)
			}
			for _, obj := range objs {
				for _, spec := range podSpecs(obj) {
					for _, c := range append(spec.InitContainers, spec.Containers...) {
						cmds = append(cmds, containerCommands(c)...)
					}
				}
			}
		case strings.HasSuffix(path, ".sh"), strings.HasSuffix(path, ".sbatch"):
			cmds = shellCommands(string(data))
		case strings.HasSuffix(path, "README.md"):
			for _, block := range shellBlocks(string(data)) {
				cmds = append(cmds, shellCommands(block)...)
			}
		}
		for _, cmd := range cmds {
			if args := synapseCall(cmd); args != nil {
				calls[rel] = append(calls[rel], args)
			}
		}
	}
	return calls
}

// shellBlocks returns the fenced code blocks of a Markdown text that are
// shell: marked sh, bash or nothing.
func shellBlocks(md string) []string {
	var blocks []string
	var block strings.Builder
	in, shell := false, false
	for _, line := range strings.SplitAfter(md, "\n") {
		fence := strings.HasPrefix(line, "```")
		switch {
		case fence && !in:
			info := strings.TrimSpace(strings.TrimPrefix(line, "```"))
			in, shell = true, info == "" || info == "sh" || info == "bash"
			block.Reset()
		case fence:
			if shell {
				blocks = append(blocks, block.String())
			}
			in = false
		case in:
			block.WriteString(line)
		}
	}
	return blocks
}

// TestExampleFlagsExist: every synapse command in the examples names a
// command and flags that exist; the scripts and Jobs that run synapse are
// found (a checker that finds nothing checks nothing).
func TestExampleFlagsExist(t *testing.T) {
	app := newApp(io.Discard, io.Discard)
	calls := exampleCalls(t)
	for file, args := range calls {
		for _, a := range args {
			if err := checkFlags(app, a); err != nil {
				t.Errorf("examples/%s: %v", file, err)
			}
		}
	}
	for file, want := range map[string]string{
		"slurm/embed-array.sbatch": "embed", "slurm/merge.sbatch": "merge",
		"k8s/embed-job.yaml": "embed", "k8s/merge-job.yaml": "merge",
		"scifact/run.sh": "search",
	} {
		if !slices.ContainsFunc(calls[file], func(a []string) bool { return a[0] == want }) {
			t.Errorf("examples/%s: no `synapse %s` found in %q", file, want, calls[file])
		}
	}
}

// TestFlagCheckerCatchesMistakes: the checker refuses an unknown flag, an
// unknown command, and finds synapse behind a variable and in `sh -c`.
func TestFlagCheckerCatchesMistakes(t *testing.T) {
	app := newApp(io.Discard, io.Discard)
	for _, tc := range []struct {
		script string
		err    string // "" when the command is fine
	}{
		{`synapse embed in.jsonl -m m.gguf -o out.arrow --shard auto/4`, ""},
		{`"$synapse" embed $INPUTS -m "$MODEL" --shardz "auto/$N"`, "synapse embed: no flag --shardz"},
		{"OMP_NUM_THREADS=1 exec /usr/bin/synapse merge out.arrow \\\n  --max-error-rat 0.1", "synapse merge: no flag --max-error-rat"},
		{`synapse embedd in.jsonl`, "synapse embedd: no such command"},
		{"synapse) synapse embed in.jsonl --bogus ;;", "synapse embed: no flag --bogus"}, // a case pattern
		{`synapse embed in.jsonl --chunk-tokens -5 -q`, ""},                              // -5 is a value
		{`synapse models add m.gguf --name x --bogus`, "synapse models add: no flag --bogus"},
	} {
		cmds := shellCommands(tc.script)
		if len(cmds) != 1 || synapseCall(cmds[0]) == nil {
			t.Errorf("%q: got commands %q; want one synapse command", tc.script, cmds)
			continue
		}
		err := checkFlags(app, synapseCall(cmds[0]))
		if tc.err == "" && err != nil || tc.err != "" && (err == nil || err.Error() != tc.err) {
			t.Errorf("%q: got %v; want %q", tc.script, err, tc.err)
		}
	}
	// Not synapse commands: an echo that mentions it, a comment.
	for _, script := range []string{`echo "synapse embed --nope"`, `# synapse embed --nope`, `synapse-embed --nope`} {
		for _, cmd := range shellCommands(script) {
			if args := synapseCall(cmd); args != nil {
				t.Errorf("%q: found the synapse command %q in it", script, args)
			}
		}
	}
	// In a manifest: a misspelt field fails the strict decode; an unknown
	// flag in the container's command is found.
	bad := []byte("apiVersion: batch/v1\nkind: Job\nspec:\n  completionMode: Indexed\n  backofLimitPerIndex: 2\n")
	if _, err := decodeManifests(bad); err == nil || !strings.Contains(err.Error(), "backofLimitPerIndex") {
		t.Errorf("a misspelt Job field: got %v; want an error naming it", err)
	}
	c := corev1.Container{Command: []string{"/bin/sh", "-c"}, Args: []string{"synapse embed x -o y --frobnicate"}}
	if err := checkFlags(app, synapseCall(containerCommands(c)[0])); err == nil || !strings.Contains(err.Error(), "--frobnicate") {
		t.Errorf("sh -c with an unknown flag: got %v; want an error naming it", err)
	}
}

// TestK8sJobsCarryTheExitCodePolicy: the Indexed Job fails an index on exit
// code 2 without a retry, retries others per index, shards by the index
// into spec.completions shards and mounts the data volume; the CronJob
// mounts the Job manifests it creates.
func TestK8sJobsCarryTheExitCodePolicy(t *testing.T) {
	job := readJob(t, repoPath("examples", "k8s", "embed-job.yaml"))
	s := job.Spec
	if s.CompletionMode == nil || *s.CompletionMode != batchv1.IndexedCompletion || s.Completions == nil {
		t.Fatalf("embed-job.yaml: completionMode %v, completions %v; want Indexed with completions", s.CompletionMode, s.Completions)
	}
	if s.BackoffLimitPerIndex == nil || *s.BackoffLimitPerIndex < 1 {
		t.Errorf("embed-job.yaml: backoffLimitPerIndex %v; want ≥ 1 (a transient exit 1 is retried)", s.BackoffLimitPerIndex)
	}
	failIndexOn2 := false
	if s.PodFailurePolicy != nil {
		for _, r := range s.PodFailurePolicy.Rules {
			e := r.OnExitCodes
			failIndexOn2 = failIndexOn2 || r.Action == batchv1.PodFailurePolicyActionFailIndex && e != nil &&
				e.Operator == batchv1.PodFailurePolicyOnExitCodesOpIn && slices.Contains(e.Values, exitUsage)
		}
	}
	if !failIndexOn2 {
		t.Errorf("embed-job.yaml: no podFailurePolicy rule FailIndex on exit code %d", exitUsage)
	}
	pod := s.Template.Spec
	if pod.RestartPolicy != corev1.RestartPolicyNever {
		t.Errorf("embed-job.yaml: restartPolicy %q; want Never (podFailurePolicy needs it)", pod.RestartPolicy)
	}
	args := synapseCall(containerCommands(pod.Containers[0])[0])
	want := fmt.Sprintf("auto/%d", *s.Completions)
	if i := slices.Index(args, "--shard"); i < 0 || i+1 >= len(args) || args[i+1] != want {
		t.Errorf("embed-job.yaml: synapse %q; want --shard %s (completions %d)", args, want, *s.Completions)
	}
	if len(pod.Containers[0].VolumeMounts) == 0 || len(pod.Volumes) == 0 || pod.Volumes[0].PersistentVolumeClaim == nil {
		t.Errorf("embed-job.yaml: no volume from a PersistentVolumeClaim mounted")
	}
	data, _ := os.ReadFile(repoPath("examples", "k8s", "nightly.yaml"))
	for _, name := range []string{"embed-job.yaml", "merge-job.yaml"} {
		if !bytes.Contains(data, []byte("/jobs/"+name)) || !bytes.Contains(data, []byte("--from-file="+name)) {
			t.Errorf("nightly.yaml does not create %s from the ConfigMap it documents", name)
		}
	}
}

// readJob decodes a file holding one Job.
func readJob(t *testing.T, path string) *batchv1.Job {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	objs, err := decodeManifests(data)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	job, ok := objs[0].(*batchv1.Job)
	if len(objs) != 1 || !ok {
		t.Fatalf("%s: %d objects; want one Job", path, len(objs))
	}
	return job
}

// TestK8sBucketJobs: the bucket variants mount no PersistentVolumeClaim,
// read the corpus from and write the parts to a bucket, merge there, and
// keep the exit-code policy of the volume variants.
func TestK8sBucketJobs(t *testing.T) {
	embed := readJob(t, repoPath("examples", "k8s", "embed-job-s3.yaml"))
	merge := readJob(t, repoPath("examples", "k8s", "merge-job-s3.yaml"))
	for name, job := range map[string]*batchv1.Job{"embed-job-s3.yaml": embed, "merge-job-s3.yaml": merge} {
		pod := job.Spec.Template.Spec
		for _, v := range pod.Volumes {
			if v.PersistentVolumeClaim != nil {
				t.Errorf("%s: mounts the PersistentVolumeClaim %s; the bucket variant needs none", name, v.PersistentVolumeClaim.ClaimName)
			}
		}
		policy := false
		if p := job.Spec.PodFailurePolicy; p != nil {
			for _, r := range p.Rules {
				policy = policy || r.OnExitCodes != nil && slices.Contains(r.OnExitCodes.Values, exitUsage)
			}
		}
		if !policy {
			t.Errorf("%s: no podFailurePolicy rule on exit code %d", name, exitUsage)
		}
	}
	args := synapseCall(containerCommands(embed.Spec.Template.Spec.Containers[0])[0])
	out := ""
	if i := slices.Index(args, "-o"); i >= 0 && i+1 < len(args) {
		out = args[i+1]
	}
	if args[0] != "embed" || !strings.HasPrefix(args[1], "s3://") || !strings.HasPrefix(out, "s3://") ||
		!slices.Contains(args, fmt.Sprintf("auto/%d", *embed.Spec.Completions)) || !slices.Contains(args, "--checkpoint-dir") {
		t.Errorf("embed-job-s3.yaml: synapse %q; want embed s3://... -o s3://... --shard auto/%d --checkpoint-dir", args, *embed.Spec.Completions)
	}
	margs := synapseCall(containerCommands(merge.Spec.Template.Spec.Containers[0])[0])
	if margs[0] != "merge" || strings.TrimSuffix(margs[1], "") != out {
		t.Errorf("merge-job-s3.yaml: synapse %q; want merge %s (the embed Job's output)", margs, out)
	}
}
