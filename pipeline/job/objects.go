package job

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"

	"github.com/synapse-embed/synapse/io/objstore"
	"github.com/synapse-embed/synapse/io/output"
)

// Outputs in a bucket. What can be known before any work is checked then:
// the URL, the bucket (it exists and the credentials are accepted:
// objstore.CheckBucket), the local directory of the resume files. A
// permanent failure is a ConfigError naming the bucket (exit 2); one the
// server may get over (it is down, it throttles) is returned as it is
// (exit 1).

// checkObjectOutput checks an output URL (flag names it in messages) and,
// when checkpointDir is not "-", the directory its resume files go to.
func checkObjectOutput(flag, url, checkpointDir string) error {
	loc, err := objstore.Parse(url)
	if err != nil {
		return configErrorf("%s %s: %w", flag, url, err)
	}
	if loc.Key == "" || loc.Key[len(loc.Key)-1] == '/' {
		return configErrorf("%s %s names a bucket or a prefix, not an object", flag, url)
	}
	if err := objstore.CheckBucket(context.Background(), url); err != nil {
		if objstore.Permanent(err) {
			return &ConfigError{fmt.Errorf("%s %s: %w", flag, url, err)}
		}
		return fmt.Errorf("%s %s: %w", flag, url, err)
	}
	if flag != "output" {
		return nil // written at the end, without resume files
	}
	base, err := output.ResumeBase(url, checkpointDir)
	if err != nil {
		return &ConfigError{err}
	}
	return checkCreatable(filepath.Dir(base))
}

// checkCreatable refuses a directory that cannot be made or written to:
// its first existing ancestor must be a writable directory. Nothing is
// made here (the check comes before any work).
func checkCreatable(dir string) error {
	for d := dir; ; d = filepath.Dir(d) {
		st, err := os.Stat(d)
		switch {
		case errors.Is(err, os.ErrNotExist) && d != filepath.Dir(d):
			continue
		case err != nil:
			return configErrorf("checkpoint directory %s: %w", dir, err)
		case !st.IsDir():
			return configErrorf("checkpoint directory %s: %s is not a directory", dir, d)
		case syscall.Access(d, 2 /* W_OK */) != nil:
			return configErrorf("checkpoint directory %s: %s is not writable (give --checkpoint-dir)", dir, d)
		}
		return nil
	}
}

// checkObjectShard stops a shard whose manifest is in the bucket already
// (unless Force: forceShard removes it once the work starts).

// statInput checks that a file or an object to be read exists: a missing
// one (or a bucket refusing access) is a ConfigError, a server that cannot
// be reached an error to retry.
func statInput(p string) error {
	if !objstore.IsURL(p) {
		if _, err := os.Stat(p); err != nil {
			return &ConfigError{err}
		}
		return nil
	}
	_, err := objstore.Stat(context.Background(), p)
	if err != nil && objstore.Permanent(err) {
		return &ConfigError{err}
	}
	return err
}
