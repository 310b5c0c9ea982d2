package output

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/synapse-embed/synapse/io/files"
)

// TestTempFilesRefusePlantedLinks: links planted in a shared output
// directory under the names temporary files had (OUT.tmp-PID,
// OUT.checkpoint.tmp, ERRORS.tmp-PID) are never followed: the files they
// point to stay as they were and the output is complete.
func TestTempFilesRefusePlantedLinks(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "out.arrow")
	victim := filepath.Join(dir, "precious.txt")
	writeFile(t, dir, "precious.txt", []byte("precious"))
	pid := strconv.Itoa(os.Getpid())
	for _, name := range []string{out + ".tmp-" + pid, out + ".errors.jsonl.tmp-" + pid, CheckpointPath(out) + ".tmp"} {
		if err := os.Symlink(victim, name); err != nil {
			t.Fatal(err)
		}
	}
	w, _, err := OpenCheckpointed(out, WriterOptions{Schema: EmbedSchema(testDims, testMeta), BatchRows: 16})
	if err != nil {
		t.Fatal(err)
	}
	putDocs(t, w, 0, 40)
	if err := w.Commit(); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(victim); string(b) != "precious" {
		t.Errorf("the file behind the planted links holds %d bytes %.20q; want it untouched", len(b), b)
	}
	want, _, _, _ := uninterrupted(t, 40, "ref.arrow")
	if got, _, _ := readArrowFile(t, out); len(got) != len(want) {
		t.Errorf("output: got %d rows; want %d", len(got), len(want))
	}
}

// TestStaleTempsRemoved: a run SIGKILLed while it writes its final output
// leaves a temporary file beside it; the resume (and a new run) removes it,
// but nothing that is not provably a dead run's: another live process's
// temporary file, or a link with a temporary file's name.
func TestStaleTempsRemoved(t *testing.T) {
	for _, resume := range []bool{true, false} {
		t.Run("resume="+strconv.FormatBool(resume), func(t *testing.T) {
			dir := t.TempDir()
			out := filepath.Join(dir, "out.arrow")
			crashAt(t, out, 3000, "DATAIO_HELPER_IN_COMMIT=1")
			left, _ := filepath.Glob(out + files.TempMarker + "*")
			if len(left) == 0 {
				t.Fatal("the killed commit left no temporary file; want one (the case this test is about)")
			}
			dead := deadPID(t)
			live := out + files.TempMarker + strconv.Itoa(os.Getppid()) + "-live"
			link := out + files.TempMarker + dead + "-link"
			writeFile(t, dir, filepath.Base(live), []byte("a live run's"))
			os.Symlink(filepath.Join(dir, "elsewhere"), link)
			if !resume {
				if err := RemoveResumeFiles(out, "", ""); err != nil {
					t.Fatal(err)
				}
			}
			w, st, err := OpenCheckpointed(out, WriterOptions{Schema: EmbedSchema(testDims, testMeta), BatchRows: 16})
			if err != nil || st.Resumed != resume {
				t.Fatalf("OpenCheckpointed: %+v, %v; want resumed %v", st, err, resume)
			}
			putDocs(t, w, st.NextIndex, 3000)
			if err := w.Commit(); err != nil {
				t.Fatal(err)
			}
			got, _ := filepath.Glob(out + files.TempMarker + "*")
			want := []string{live, link}
			slices.Sort(want) // as Glob sorts: the PIDs' digits decide the order
			if strings.Join(got, " ") != strings.Join(want, " ") {
				t.Errorf("temporary files after the run: %q; want only %q", got, want)
			}
		})
	}
}

// deadPID returns the pid of a process that has exited.
func deadPID(t *testing.T) string {
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	return strconv.Itoa(cmd.Process.Pid)
}

// TestSharedErrorsFileLocked: a second run whose errors file is the errors
// file of a run in progress is refused (ErrInUse) and the first run's
// error records survive.
func TestSharedErrorsFileLocked(t *testing.T) {
	dir := t.TempDir()
	errs := filepath.Join(dir, "errors.jsonl")
	opts := WriterOptions{Schema: EmbedSchema(testDims, testMeta), BatchRows: 16, ErrorsPath: errs}
	a, _, err := OpenCheckpointed(filepath.Join(dir, "a.arrow"), opts)
	if err != nil {
		t.Fatal(err)
	}
	putDocs(t, a, 0, 40)
	b, _, err := OpenCheckpointed(filepath.Join(dir, "b.arrow"), opts)
	if !errors.Is(err, ErrInUse) {
		if b != nil {
			b.Abort()
		}
		t.Errorf("second run on the same errors file: got %v; want ErrInUse", err)
	}
	if err := RemoveResumeFiles(filepath.Join(dir, "c.arrow"), errs, ""); !errors.Is(err, ErrInUse) {
		t.Errorf("removing resume files of a run in progress: got %v; want ErrInUse", err)
	}
	if err := a.Commit(); err != nil {
		t.Fatal(err)
	}
	_, _, want, _ := uninterrupted(t, 40, "ref.arrow")
	if got, _ := os.ReadFile(errs); string(got) != string(want) {
		t.Errorf("errors file: got %d bytes; want the first run's %d", len(got), len(want))
	}
}

// TestCheckPaths: what clashes, and what does not.
func TestCheckPaths(t *testing.T) {
	dir := t.TempDir()
	model := writeFile(t, dir, "model.onnx", []byte("m"))
	os.Mkdir(filepath.Join(dir, "onnxdir"), 0o755)
	for _, tc := range []struct {
		name string
		uses []files.PathUse
		ok   bool
	}{
		{"distinct", append(files.Reads("--model", model), files.Writes("-o", filepath.Join(dir, "x.arrow"))...), true},
		{"two reads of one file", append(files.Reads("the input", model), files.Reads("--model", model)...), true},
		{"write over a read", append(files.Reads("--model", model), files.Writes("--errors", model)...), false},
		{"same path relative and absolute", append(files.Writes("-o", filepath.Join(dir, "x.arrow")), files.Writes("--errors", filepath.Join(dir, ".", "sub", "..", "x.arrow"))...), false},
		{"write inside a read directory", append(files.Reads("--model", filepath.Join(dir, "onnxdir")), files.Writes("-o", filepath.Join(dir, "onnxdir", "x.arrow"))...), false},
		{"one s3 URL twice", append(files.Reads("the input", "s3://b/k.jsonl"), files.Writes("-o", "s3://b/k.jsonl")...), false},
		{"two s3 URLs", append(files.Reads("the input", "s3://b/k.jsonl"), files.Writes("-o", "s3://b/o.arrow")...), true},
		{"stdin", append(files.Reads("the input", "-"), files.Writes("-o", filepath.Join(dir, "x.arrow"))...), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := files.CheckPaths(tc.uses)
			if (err == nil) != tc.ok || (err != nil && !errors.Is(err, files.ErrPathClash)) {
				t.Errorf("CheckPaths: got %v; want ok %v", err, tc.ok)
			}
		})
	}
}
