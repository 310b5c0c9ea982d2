package supervise

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"sync"
	"syscall"
)

// Spec describes one worker process to start.
type Spec struct {
	Path string   // executable
	Args []string // arguments after the program name
	Env  []string // complete environment
}

// Process is a started worker process.
type Process interface {
	// PID returns the operating system process id.
	PID() int
	// Wait blocks until the process has exited and been reaped. It may be
	// called any number of times from any goroutine.
	Wait() Exit
	// Kill sends SIGKILL. It is safe to call twice, concurrently, and after
	// the process exited.
	Kill() error
	// Stdout and Stderr read the process's output until every writer closed
	// it. The pool drains both until EOF or until it closes them.
	Stdout() io.ReadCloser
	Stderr() io.ReadCloser
}

// Exit is how a process ended.
type Exit struct {
	Status int    // exit code; -1 if killed by a signal
	Signal string // e.g. "SIGKILL"; "" if it exited by itself
	Err    error  // a wait error other than a non-zero exit, if any
}

func (e Exit) String() string {
	if e.Signal != "" {
		return "killed by " + e.Signal
	}
	return fmt.Sprintf("exit status %d", e.Status)
}

// Launcher starts worker processes. Launch is always called on the pool's
// spawner thread, a locked OS thread that lives as long as the pool, so a
// parent-death signal bound to the spawning thread fires only when the
// module dies.
type Launcher interface {
	Launch(Spec) (Process, error)
}

// ExecLauncher starts workers with os/exec. On Linux the child gets
// SIGKILL when the module dies (Pdeathsig) and its own process group, so a
// terminal's Ctrl-C reaches the module, which shuts workers down in order.
type ExecLauncher struct{}

// Launch starts s with stdout and stderr on pipes and no stdin.
func (ExecLauncher) Launch(s Spec) (Process, error) {
	outR, outW, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("supervise: stdout pipe: %w", err)
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		outR.Close()
		outW.Close()
		return nil, fmt.Errorf("supervise: stderr pipe: %w", err)
	}
	cmd := exec.Command(s.Path, s.Args...)
	cmd.Env = s.Env
	cmd.Stdout = outW // *os.File: handed to the child, no copying goroutine
	cmd.Stderr = errW
	cmd.SysProcAttr = sysProcAttr()
	err = cmd.Start()
	outW.Close()
	errW.Close()
	if err != nil {
		outR.Close()
		errR.Close()
		return nil, fmt.Errorf("supervise: spawn %s: %w", s.Path, err)
	}
	p := &execProcess{cmd: cmd, stdout: outR, stderr: errR, done: make(chan struct{})}
	go p.reap()
	return p, nil
}

// execProcess is a Process started by ExecLauncher.
type execProcess struct {
	cmd            *exec.Cmd
	stdout, stderr *os.File
	done           chan struct{} // closed by reap
	exit           Exit
	killOnce       sync.Once
	killErr        error
}

// reap waits for the process once; it is the only caller of cmd.Wait.
func (p *execProcess) reap() {
	err := p.cmd.Wait()
	p.exit = exitOf(p.cmd.ProcessState, err)
	close(p.done)
}

func (p *execProcess) PID() int              { return p.cmd.Process.Pid }
func (p *execProcess) Stdout() io.ReadCloser { return p.stdout }
func (p *execProcess) Stderr() io.ReadCloser { return p.stderr }

func (p *execProcess) Wait() Exit {
	<-p.done
	return p.exit
}

func (p *execProcess) Kill() error {
	p.killOnce.Do(func() {
		// os.Process signals through a pidfd on Linux, so a reaped pid
		// that was reused is never hit.
		err := p.cmd.Process.Kill()
		if err != nil && !errors.Is(err, os.ErrProcessDone) {
			p.killErr = fmt.Errorf("supervise: kill pid %d: %w", p.PID(), err)
		}
	})
	return p.killErr
}

// exitOf describes a finished process.
func exitOf(ps *os.ProcessState, waitErr error) Exit {
	if ps == nil {
		return Exit{Status: -1, Err: waitErr}
	}
	e := Exit{Status: ps.ExitCode()}
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		e.Status = -1
		e.Signal = signalName(ws.Signal())
	}
	var ee *exec.ExitError
	if waitErr != nil && !errors.As(waitErr, &ee) {
		e.Err = waitErr
	}
	return e
}

// signalName returns the conventional name of a signal ("SIGABRT").
func signalName(s syscall.Signal) string {
	switch s {
	case syscall.SIGABRT:
		return "SIGABRT"
	case syscall.SIGKILL:
		return "SIGKILL"
	case syscall.SIGSEGV:
		return "SIGSEGV"
	case syscall.SIGBUS:
		return "SIGBUS"
	case syscall.SIGILL:
		return "SIGILL"
	case syscall.SIGFPE:
		return "SIGFPE"
	case syscall.SIGTERM:
		return "SIGTERM"
	case syscall.SIGINT:
		return "SIGINT"
	case syscall.SIGHUP:
		return "SIGHUP"
	case syscall.SIGPIPE:
		return "SIGPIPE"
	case syscall.SIGQUIT:
		return "SIGQUIT"
	case syscall.SIGTRAP:
		return "SIGTRAP"
	}
	return fmt.Sprintf("signal %d", int(s))
}

// spawner runs Launch calls on one locked OS thread. Linux delivers
// Pdeathsig when the thread that forked the child exits, not the process;
// the Go runtime destroys a thread when a goroutine locked to it returns, so
// spawning from arbitrary goroutines could kill workers at random. The
// spawner goroutine stays locked for the pool's lifetime and returns (still
// locked, so the thread exits and any surviving child gets SIGKILL) only
// after the pool has stopped every worker.
type spawner struct {
	reqs chan spawnReq
	done chan struct{}
}

type spawnReq struct {
	l     Launcher
	spec  Spec
	reply chan spawnReply
}

type spawnReply struct {
	p   Process
	err error
}

func newSpawner() *spawner {
	s := &spawner{reqs: make(chan spawnReq), done: make(chan struct{})}
	go s.loop()
	return s
}

func (s *spawner) loop() {
	runtime.LockOSThread() // never unlocked: the thread dies with the goroutine
	defer close(s.done)
	for r := range s.reqs {
		p, err := r.l.Launch(r.spec)
		r.reply <- spawnReply{p, err}
	}
}

// launch starts spec on the spawner thread.
func (s *spawner) launch(l Launcher, spec Spec) (Process, error) {
	reply := make(chan spawnReply, 1)
	s.reqs <- spawnReq{l, spec, reply}
	r := <-reply
	return r.p, r.err
}

// close stops the spawner and waits for its goroutine. No launch may be in
// progress or follow.
func (s *spawner) close() {
	close(s.reqs)
	<-s.done
}
