package main

// How one container runs: its command as a local process, PID 1 of a new PID namespace, output in CRI log format.

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
)

type runningProcess struct {
	proc    *os.Process
	cmd     *exec.Cmd
	outputs sync.WaitGroup
}

// startProcess starts the container's command. Without a command the image's own entrypoint is taken to be a
// long-running server (the simulated images have none to read).
func startProcess(c *container, s *sandbox, env []string, toolDir string, gpuTable []realGPU) (*runningProcess, error) {
	argv := append(append([]string{}, c.config.Command...), c.config.Args...)
	if len(argv) == 0 {
		argv = []string{"sleep", "infinity"}
	}
	path, err := lookPath(argv[0], env)
	if err != nil {
		return nil, err
	}
	// A login shell (`bash -lc`, as in the walkthrough) resets PATH from /etc/profile: the HOME profile puts the
	// node's nvidia-smi back in front, as the image's own profile would.
	for _, profile := range []string{".bash_profile", ".profile"} {
		if toolDir != "" {
			_ = os.WriteFile(filepath.Join(c.workDir, profile), []byte(fmt.Sprintf("export PATH=%s:$PATH\n", toolDir)), 0o644)
		}
	}
	if hostname := s.config.GetHostname(); hostname != "" {
		env = append(env, "HOSTNAME="+hostname)
	}
	cmd := &exec.Cmd{Path: path, Args: argv, Env: env, Dir: c.workDir}
	// PID 1 of its own PID namespace: a signal without a handler does not kill it (a shell without a trap ignores
	// SIGTERM), and when it exits the kernel ends every other process of the container, as in a real container.
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWPID, Setsid: true}
	if gpuTable != nil || len(deviceListMounts(c.config.Mounts)) > 0 {
		// A mount namespace of its own, where container-init leaves only the container's GPUs (real GPUs) and
		// mounts the device plugin's device list.
		self, err := os.Executable()
		if err != nil {
			return nil, err
		}
		cmd.Path = self
		cmd.Args = containerInitArgv(self, gpuTable != nil, containerGPUs(gpuTable, env, c.deviceNodes, c.config.Mounts),
			c.config.Mounts, path, argv)
		cmd.SysProcAttr.Cloneflags |= syscall.CLONE_NEWNS
	}
	stdoutRead, stdoutWrite, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	stderrRead, stderrWrite, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = nil, stdoutWrite, stderrWrite
	err = cmd.Start()
	stdoutWrite.Close()
	stderrWrite.Close()
	if err != nil {
		stdoutRead.Close()
		stderrRead.Close()
		return nil, err
	}
	running := &runningProcess{proc: cmd.Process, cmd: cmd}
	logFile := &criLog{path: c.logPath}
	for stream, reader := range map[string]io.ReadCloser{"stdout": stdoutRead, "stderr": stderrRead} {
		running.outputs.Add(1)
		go func(stream string, reader io.ReadCloser) {
			defer running.outputs.Done()
			defer reader.Close()
			logFile.copy(stream, reader)
		}(stream, reader)
	}
	return running, nil
}

// wait returns the exit code once the process has exited and its output is in the log (the kubelet may read
// the log as soon as it sees the container exited).
func (p *runningProcess) wait() int32 {
	err := p.cmd.Wait()
	done := make(chan struct{})
	go func() { p.outputs.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
	}
	if err == nil {
		return 0
	}
	if exit, ok := err.(*exec.ExitError); ok {
		if status, ok := exit.Sys().(syscall.WaitStatus); ok && status.Signaled() {
			return int32(128 + status.Signal())
		}
		return int32(exit.ExitCode())
	}
	return 128
}

func lookPath(name string, env []string) (string, error) {
	if strings.Contains(name, "/") {
		return name, nil
	}
	for _, entry := range env {
		if value, ok := strings.CutPrefix(entry, "PATH="); ok {
			for _, dir := range filepath.SplitList(value) {
				candidate := filepath.Join(dir, name)
				if info, err := os.Stat(candidate); err == nil && !info.IsDir() && info.Mode()&0o111 != 0 {
					return candidate, nil
				}
			}
		}
	}
	return "", fmt.Errorf("exec: %q: executable file not found in $PATH", name)
}

// criLog writes lines as the kubelet reads them: "<RFC3339Nano time> <stream> <F|P> <text>".
type criLog struct {
	path string
	mu   sync.Mutex
}

func (l *criLog) copy(stream string, reader io.Reader) {
	buffered := bufio.NewReaderSize(reader, 16*1024)
	for {
		line, err := buffered.ReadString('\n')
		if line != "" {
			tag := "F"
			if !strings.HasSuffix(line, "\n") && err == nil {
				tag = "P" // a line longer than the buffer continues in the next entry
			}
			l.write(fmt.Sprintf("%s %s %s %s\n", time.Now().UTC().Format(time.RFC3339Nano), stream, tag,
				strings.TrimSuffix(line, "\n")))
		}
		if err != nil {
			return
		}
	}
}

func (l *criLog) write(entry string) {
	if l.path == "" {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	// Opened per entry: a log the kubelet rotated (ReopenContainerLog) is followed without bookkeeping.
	file, err := os.OpenFile(l.path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o640)
	if err != nil {
		return
	}
	defer file.Close()
	_, _ = file.WriteString(entry)
}
