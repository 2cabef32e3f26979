package hosts

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// killWait bounds how long Kill waits for a SIGKILLed process to be
// reaped (one stuck in uninterruptible sleep may take that long or never
// die).
const killWait = 30 * time.Second

// Proc is a process started on a host with Host.Start. This process is
// its parent and reaps it as soon as it exits, so its pid cannot be
// reused while the Proc reports it running. Its methods are safe for
// concurrent use.
type Proc struct {
	host *Host
	bin  string
	log  string
	cmd  *exec.Cmd
	pid  int
	done chan struct{} // closed once reaped

	mu    sync.Mutex
	state *os.ProcessState // set once reaped
}

// Start runs bin with args inside the host's network namespace, through
// ip netns exec, which enters the namespace (and a private mount
// namespace with the namespace's /sys) and then execs bin in place: the
// pid is bin's own. Start returns once that exec has happened, so signals
// from then on reach bin, not ip. bin is looked up on PATH if it has no
// slash. env is the whole environment, as exec.Cmd.Env (nil: the
// harness's). Standard output and error are appended to logPath (created
// 0644 if missing); standard input is /dev/null. The process leads its
// own process group, and every signal the Proc sends goes to that group.
//
// A bin that exits at once still gets its Proc, already exited (a failed
// exec shows as ip's exit status and message in the log). If bin is ip
// itself, Start cannot see the exec and does not wait for it. If the
// harness dies, the process lives on (nothing ties it to us):
// CleanupStale kills it. Start needs root and blocks for a few ms.
func (h *Host) Start(bin string, args, env []string, logPath string) (*Proc, error) {
	path, err := exec.LookPath(bin)
	if err != nil {
		return nil, fmt.Errorf("hosts: start %s on host %d: %w", bin, h.index, err)
	}
	if path, err = filepath.Abs(path); err != nil {
		return nil, fmt.Errorf("hosts: start %s on host %d: %w", bin, h.index, err)
	}
	ipBin, err := ipPath()
	if err != nil {
		return nil, err
	}
	log, err := os.OpenFile(logPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("hosts: start %s on host %d: log: %w", bin, h.index, err)
	}
	defer log.Close() // the child has its own copy
	cmd := exec.Command(ipBin, append([]string{"netns", "exec", h.ns, path}, args...)...)
	cmd.Env = env
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}

	n := h.net
	n.mu.Lock()
	if n.closed {
		n.mu.Unlock()
		return nil, fmt.Errorf("%w: start %s on host %d", ErrClosed, bin, h.index)
	}
	if err := cmd.Start(); err != nil {
		n.mu.Unlock()
		return nil, fmt.Errorf("hosts: start %s on host %d: %w", bin, h.index, err)
	}
	p := &Proc{host: h, bin: path, log: logPath, cmd: cmd, pid: cmd.Process.Pid, done: make(chan struct{})}
	n.procs = append(n.procs, p)
	n.mu.Unlock()
	go p.reap()

	if err := p.awaitExec(ipBin); err != nil {
		_ = p.Kill()
		return nil, fmt.Errorf("hosts: start %s on host %d: %w", bin, h.index, err)
	}
	return p, nil
}

// reap waits for the process to exit, then reaps it holding p.mu: so
// whoever holds p.mu and sees state nil knows the pid (and process group
// id) is still this process's, alive or a zombie, and not reused.
func (p *Proc) reap() {
	waitExited(p.pid)
	p.mu.Lock()
	_ = p.cmd.Wait()
	p.state = p.cmd.ProcessState
	p.mu.Unlock()
	close(p.done)
}

// waitExited blocks until child pid has exited, without reaping it
// (waitid with WNOWAIT), so that the reaping can happen under a lock.
func waitExited(pid int) {
	var info unix.Siginfo
	for {
		if err := unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOWAIT, nil); err != unix.EINTR {
			return
		}
	}
}

// awaitExec polls until ip netns exec has execed bin: the process is in
// the host's namespace (ip has entered it) and no longer runs ip. Right
// after the fork it runs the harness's own binary in the harness's
// namespace, so neither test alone would do. A process that has already
// ended is not waited for: its Proc reports the exit.
func (p *Proc) awaitExec(ipBin string) error {
	ipExe, err := filepath.EvalSymlinks(ipBin)
	if err != nil {
		return err
	}
	if b, err := filepath.EvalSymlinks(p.bin); err == nil && b == ipExe {
		return nil // cannot tell ip from ip; do not wait
	}
	target, err := nsInode(netnsPath(p.host.ns))
	if err != nil {
		return err
	}
	proc := "/proc/" + strconv.Itoa(p.pid)
	deadline := time.Now().Add(10 * time.Second)
	for wait := 100 * time.Microsecond; ; wait = min(2*wait, 10*time.Millisecond) {
		select {
		case <-p.done:
			return nil
		default:
		}
		ns, nerr := nsInode(proc + "/ns/net")
		exe, eerr := os.Readlink(proc + "/exe")
		if nerr == nil && eerr == nil && ns == target && exe != ipExe {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("pid %d has not execed %s after 10s (still %s)", p.pid, p.bin, exe)
		}
		time.Sleep(wait)
	}
}

// nsInode is the inode of a namespace file (/run/netns/X or
// /proc/<pid>/ns/net): equal inodes, same namespace.
func nsInode(path string) (uint64, error) {
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		return 0, fmt.Errorf("hosts: stat %s: %w", path, err)
	}
	return st.Ino, nil
}

// Pid is the process's pid (bin's own; see Start).
func (p *Proc) Pid() int { return p.pid }

// Host is the host the process runs on.
func (p *Proc) Host() *Host { return p.host }

// LogPath is where the process's output goes.
func (p *Proc) LogPath() string { return p.log }

// signal sends sig to the process group while the process is unreaped
// (so the group id is still ours). ErrExited once it is reaped.
func (p *Proc) signal(sig syscall.Signal) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.state != nil {
		return fmt.Errorf("%w: pid %d (%s): %v", ErrExited, p.pid, p.bin, p.state)
	}
	if err := syscall.Kill(-p.pid, sig); err != nil {
		if errors.Is(err, syscall.ESRCH) {
			return fmt.Errorf("%w: pid %d (%s)", ErrExited, p.pid, p.bin)
		}
		return fmt.Errorf("hosts: signal %v to pid %d: %w", sig, p.pid, err)
	}
	return nil
}

// Kill sends SIGKILL and blocks until the process is reaped (up to 30 s;
// an error after that). Killing a process that has already exited is
// not an error.
func (p *Proc) Kill() error {
	if err := p.signal(syscall.SIGKILL); err != nil && !errors.Is(err, ErrExited) {
		return err
	}
	select {
	case <-p.done:
		return nil
	case <-time.After(killWait):
		return fmt.Errorf("hosts: pid %d (%s) not reaped %v after SIGKILL", p.pid, p.bin, killWait)
	}
}

// Pause sends SIGSTOP. It does not wait for the stop to take effect:
// poll Paused for that. ErrExited if the process has exited.
func (p *Proc) Pause() error { return p.signal(syscall.SIGSTOP) }

// Resume sends SIGCONT. ErrExited if the process has exited.
func (p *Proc) Resume() error { return p.signal(syscall.SIGCONT) }

// Term sends SIGTERM and does not wait (see Wait). A paused process acts
// on it only once resumed. ErrExited if the process has exited.
func (p *Proc) Term() error { return p.signal(syscall.SIGTERM) }

// Wait blocks until the process has exited and been reaped, or timeout
// has passed (timeout <= 0: just look). exited says which; code is the
// exit status, or -1 if a signal ended it (or it has not exited).
func (p *Proc) Wait(timeout time.Duration) (exited bool, code int) {
	if timeout > 0 {
		t := time.NewTimer(timeout)
		defer t.Stop()
		select {
		case <-p.done:
		case <-t.C:
		}
	}
	select {
	case <-p.done:
		return true, p.state.ExitCode()
	default:
		return false, -1
	}
}

// State is how the process ended, nil while it has not (or has not yet
// been reaped).
func (p *Proc) State() *os.ProcessState {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.state
}

// Running reports whether the process has not yet exited and been reaped.
func (p *Proc) Running() bool {
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// Paused reports whether the kernel shows the process stopped: state T
// (or t, stopped under a tracer) in /proc/<pid>/stat. It reads the file
// once and does not wait; ErrExited if the process has been reaped.
func (p *Proc) Paused() (bool, error) {
	p.mu.Lock()
	defer p.mu.Unlock() // held so the pid is not reaped (and reused) under us (see reap)
	if p.state != nil {
		return false, fmt.Errorf("%w: pid %d (%s): %v", ErrExited, p.pid, p.bin, p.state)
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(p.pid) + "/stat")
	if err != nil {
		return false, fmt.Errorf("hosts: read state of pid %d: %w", p.pid, err)
	}
	st, err := procState(b)
	if err != nil {
		return false, fmt.Errorf("hosts: pid %d: %w", p.pid, err)
	}
	return st == 'T' || st == 't', nil
}

// procState returns the state field of a /proc/<pid>/stat line: the
// character after the ") " that ends the command name (which may itself
// hold spaces and parentheses).
func procState(stat []byte) (byte, error) {
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 || i+2 >= len(stat) {
		return 0, fmt.Errorf("malformed stat %q", stat)
	}
	return stat[i+2], nil
}
