package supervise

import (
	"bufio"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/synapse-embed/synapse/wire"
	"golang.org/x/sys/unix"
)

// TestModuleKilled SIGKILLs a module process (a helper that runs a pool of
// one worker that ignores EOF and SHUTDOWN) and checks that the worker dies
// by the parent-death signal. The test process asks to become a child
// subreaper so that the orphaned worker is reparented to it and its exit
// status (killed by SIGKILL) can be read. Where that request has no effect
// (a sandbox may accept the prctl and still hand orphans to its own init),
// the worker's exit is observed through a pidfd instead.
func TestModuleKilled(t *testing.T) {
	if _, _, errno := syscall.RawSyscall(syscall.SYS_PRCTL, 36 /* PR_SET_CHILD_SUBREAPER */, 1, 0); errno != 0 {
		t.Logf("prctl(PR_SET_CHILD_SUBREAPER): %v; observing the worker in /proc only", errno)
	}
	dir := shortDir(t)
	cmd := exec.Command(os.Args[0], helperCommand()[1:]...)
	cmd.Env = append(os.Environ(), helperEnv+"=module", "SUPERVISE_RUNTIME="+dir, "GORACE=atexit_sleep_ms=0")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line := bounded(t, "module start", func() string {
		l, _ := bufio.NewReader(out).ReadString('\n')
		return strings.TrimSpace(l)
	})
	pid, err := strconv.Atoi(line)
	if err != nil {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("module said %q; want the worker pid", line)
	}
	before, err := readProcStat(pid)
	if err != nil || before.state == "Z" || before.ppid != cmd.Process.Pid {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("worker %d before the module is killed: %+v, %v; want a live child of module %d", pid, before, err, cmd.Process.Pid)
	}
	pidfd, err := unix.PidfdOpen(pid, 0) // pins the worker: its pid cannot be reused under us
	if err != nil {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("pidfd_open(%d): %v", pid, err)
	}
	defer unix.Close(pidfd)
	cmd.Process.Kill()
	cmd.Wait()
	waitExit(t, pid, pidfd)

	// The dead module left its socket; the next pool in this directory
	// sweeps it away.
	stale, _ := filepath.Glob(filepath.Join(dir, "synapse", "workers", "*.sock"))
	if len(stale) != 1 {
		t.Fatalf("socket files after module kill: got %v; want the dead module's one", stale)
	}
	cfg := helperConfig(t, "worker", "")
	cfg.RuntimeDir = dir
	p := startPool(t, cfg)
	if _, err := os.Lstat(stale[0]); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("stale socket %s: got %v; want removed", stale[0], err)
	}
	_ = p
}

// TestSpawnThreadExit starts a pool from a goroutine that is locked to its
// OS thread and exits without unlocking, which destroys the thread. A
// worker forked from that thread would get its Pdeathsig; workers forked
// from the pool's own spawner thread must survive.
func TestSpawnThreadExit(t *testing.T) {
	cfg := helperConfig(t, "worker", "")
	type started struct {
		p   *Pool
		tid int
		err error
	}
	checkLeaks(t)
	var s started
	for try := 0; s.p == nil; try++ {
		if try == 20 {
			t.Skip("every try ran on the main thread, which the runtime never destroys")
		}
		ch := make(chan started, 1)
		go func() {
			runtime.LockOSThread() // never unlocked: the thread dies with this goroutine
			if syscall.Gettid() == os.Getpid() {
				runtime.UnlockOSThread() // the main thread is wedged, not destroyed: try again
				ch <- started{}
				return
			}
			p, err := NewPool(context.Background(), cfg)
			ch <- started{p, syscall.Gettid(), err}
		}()
		s = bounded(t, "NewPool", func() started { return <-ch })
		if s.err != nil {
			t.Fatal(s.err)
		}
	}
	p := s.p
	defer p.Close()
	task := filepath.Join("/proc/self/task", strconv.Itoa(s.tid))
	deadline := time.Now().Add(waitBound)
	for { // the thread's exit (and any Pdeathsig) happens after the goroutine returns
		if _, err := os.Stat(task); errors.Is(err, os.ErrNotExist) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("thread %d still exists", s.tid)
		}
		runtime.Gosched()
	}
	pid := p.Health().Workers[0].PID
	if !processAlive(pid) {
		t.Fatalf("worker %d died with the thread that created the pool", pid)
	}
	if _, err := p.Do(context.Background(), &wire.Ping{}, time.Minute); err != nil {
		t.Errorf("ping: %v", err)
	}
}

// waitExit waits, at most waitBound, until the process behind pidfd exits.
// If it was reparented to this process its status must say SIGKILL; else
// another process reaps it and its exit is all there is to see.
func waitExit(t *testing.T, pid, pidfd int) {
	t.Helper()
	fds := []unix.PollFd{{Fd: int32(pidfd), Events: unix.POLLIN}}
	for {
		n, err := unix.Poll(fds, int(waitBound.Milliseconds()))
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			t.Fatalf("poll pidfd of worker %d: %v", pid, err)
		}
		if n == 0 {
			unix.PidfdSendSignal(pidfd, unix.SIGKILL, nil, 0)
			t.Fatalf("worker %d outlived its killed module by %v", pid, waitBound)
		}
		break
	}
	var ws syscall.WaitStatus
	got, err := syscall.Wait4(pid, &ws, syscall.WNOHANG, nil)
	switch {
	case got == pid:
		if !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
			t.Errorf("worker %d: status %v; want killed by SIGKILL", pid, ws)
		}
	case errors.Is(err, syscall.ECHILD):
		t.Logf("worker %d was not reparented to the test; it exited", pid)
	default:
		t.Fatalf("wait4(%d) after its exit: %d, %v", pid, got, err)
	}
}

// procStat is what TestModuleKilled reads of /proc/PID/stat.
type procStat struct {
	state string
	ppid  int
	start uint64 // clock ticks after boot: tells a reused pid apart
}

func readProcStat(pid int) (procStat, error) {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return procStat{}, err
	}
	// "pid (comm) state ppid ..."; comm may hold spaces and parentheses.
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return procStat{}, errors.New("malformed stat: " + string(b))
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 20 {
		return procStat{}, errors.New("short stat: " + string(b))
	}
	var s procStat
	s.state = f[0]
	s.ppid, _ = strconv.Atoi(f[1])
	s.start, _ = strconv.ParseUint(f[19], 10, 64) // field 22 overall
	return s, nil
}
