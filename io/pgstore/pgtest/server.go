package pgtest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// Bounds of the waits: a server that takes longer is broken, not slow.
const (
	readyTimeout = 60 * time.Second // initdb, or a start with crash recovery
	stopTimeout  = 10 * time.Second // an immediate shutdown before SIGKILL
)

// command is one of the installation's programs, run as the server's user
// with an environment of its own (no PGDATA, PGHOST or locale of the
// test's).
func (s *Server) command(name string, args ...string) *exec.Cmd {
	cmd := exec.Command(filepath.Join(s.bin, name), args...)
	cmd.Env = []string{"PATH=" + s.bin + ":/usr/bin:/bin", "LC_ALL=C", "TZ=UTC"}
	cmd.Dir = s.SocketDir
	cmd.SysProcAttr = sysProcAttr(s.cred)
	return cmd
}

// initdb makes the cluster: the superuser's password from a file that is
// removed afterwards, SCRAM-SHA-256 for every connection.
func (s *Server) initdb() error {
	pwfile := filepath.Join(s.SocketDir, "pwfile")
	if err := os.WriteFile(pwfile, []byte(s.Password+"\n"), 0o600); err != nil {
		return fmt.Errorf("pgtest: %w", err)
	}
	defer os.Remove(pwfile)
	if err := s.chown(pwfile); err != nil {
		return err
	}
	out, err := s.command("initdb", "-D", s.DataDir, "-U", Superuser, "--pwfile", pwfile,
		"-A", "scram-sha-256", "-E", "UTF8", "--locale", "C", "--no-sync", "--no-instructions").CombinedOutput()
	if err != nil {
		hint := ""
		if s.cred != nil {
			hint = fmt.Sprintf(" (run as %s: the installation %s must be readable by it)", SystemUser, s.bin)
		}
		return fmt.Errorf("pgtest: initdb%s: %w\n%s", hint, err, out)
	}
	return nil
}

// start runs the postmaster on the cluster and waits until it accepts
// connections. A start that fails kills it.
func (s *Server) start() error {
	log, err := os.OpenFile(s.logPath, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		return fmt.Errorf("pgtest: %w", err)
	}
	defer log.Close()
	cmd := s.command("postgres", "-D", s.DataDir, "-c", "listen_addresses=", "-c", "unix_socket_directories="+s.SocketDir,
		"-c", "fsync=off", "-c", "huge_pages=off")
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("pgtest: start postgres: %w", err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	s.mu.Lock()
	s.cmd, s.exited = cmd, exited
	s.mu.Unlock()
	if err := s.waitReady(cmd.Process.Pid, exited); err != nil {
		s.Kill()
		return err
	}
	return nil
}

// waitReady waits until postmaster.pid names this postmaster and says
// "ready", as pg_ctl start -w does.
func (s *Server) waitReady(pid int, exited <-chan struct{}) error {
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(readyTimeout)
	for {
		if b, err := os.ReadFile(filepath.Join(s.DataDir, "postmaster.pid")); err == nil {
			lines := strings.Split(string(b), "\n")
			if len(lines) > 7 && lines[0] == strconv.Itoa(pid) && strings.TrimSpace(lines[7]) == "ready" {
				return nil
			}
		}
		select {
		case <-exited:
			return fmt.Errorf("pgtest: postgres exited at start:\n%s", s.Log())
		case <-deadline:
			return fmt.Errorf("pgtest: postgres was not ready within %v:\n%s", readyTimeout, s.Log())
		case <-tick.C:
		}
	}
}

// bootstrap creates the test role, its database and the extension, and
// reads the versions.
func (s *Server) bootstrap() error {
	ctx, cancel := context.WithTimeout(context.Background(), readyTimeout)
	defer cancel()
	err := execSQL(ctx, s.libpqURL(Superuser, "postgres"),
		fmt.Sprintf("CREATE ROLE %s LOGIN PASSWORD '%s'", User, s.Password), // hex: nothing to quote
		fmt.Sprintf("CREATE DATABASE %s OWNER %s", Database, User))
	if err != nil {
		return err
	}
	if err := execSQL(ctx, s.AdminURL, "CREATE EXTENSION vector"); err != nil {
		return err
	}
	conn, err := pgx.Connect(ctx, s.URL)
	if err != nil {
		return fmt.Errorf("pgtest: connect as %s: %w", User, err)
	}
	defer conn.Close(ctx)
	err = conn.QueryRow(ctx, "SELECT current_setting('server_version'), extversion FROM pg_extension WHERE extname = 'vector'").
		Scan(&s.version, &s.vector)
	if err != nil {
		return fmt.Errorf("pgtest: versions: %w", err)
	}
	return nil
}

// execSQL runs each statement on one connection to url.
func execSQL(ctx context.Context, url string, statements ...string) error {
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return fmt.Errorf("pgtest: connect: %w", err)
	}
	defer conn.Close(ctx)
	for _, sql := range statements {
		if _, err := conn.Exec(ctx, sql); err != nil {
			return fmt.Errorf("pgtest: %s: %w", sql, err)
		}
	}
	return nil
}

// Conn connects to Database as User, closed when the test ends.
func (s *Server) Conn(t testing.TB) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), s.URL)
	if err != nil {
		t.Fatalf("pgtest: connect: %v", err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

// Kill SIGKILLs the postmaster and its children (backends and workers),
// as a crash of the server would, and waits until they have exited. Safe
// to call twice, and from another goroutine than the test's (mid-COPY,
// say).
func (s *Server) Kill() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.kill()
}

func (s *Server) kill() {
	if s.cmd == nil {
		return
	}
	kids := killTree(s.cmd.Process.Pid)
	<-s.exited
	s.cmd = nil
	// A child that outlived the postmaster would keep the shared memory
	// that a restart needs free.
	deadline := time.Now().Add(stopTimeout)
	for _, k := range kids {
		for !gone(k) && time.Now().Before(deadline) {
			time.Sleep(time.Millisecond)
		}
	}
}

// Stop shuts the server down: SIGQUIT, the immediate shutdown that
// pg_ctl stop -m immediate sends, a bounded wait, then Kill. Safe to call
// twice; the test's cleanup calls it.
func (s *Server) Stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return
	}
	s.cmd.Process.Signal(syscall.SIGQUIT)
	select {
	case <-s.exited:
	case <-time.After(stopTimeout):
	}
	s.kill()
}

// Restart stops the server if it runs and starts it again on the same
// cluster, which recovers from its log what a Kill left.
func (s *Server) Restart(t testing.TB) {
	t.Helper()
	s.Stop()
	if err := s.start(); err != nil {
		t.Fatal(err)
	}
}
