package nodeagent

import (
	"fmt"
	"io"
	"os"
	"path/filepath"

	corev1 "k8s.io/api/core/v1"
)

// The kubelet's limits on termination messages (pkg/kubelet/container/runtime.go).
const (
	maxTerminationMessage        = 4096      // bytes read from terminationMessagePath: its last 4096
	maxTerminationMessageLogs    = 2048      // bytes taken from the logs by FallbackToLogsOnError
	maxTerminationMessageLines   = 80        // lines taken from the logs by FallbackToLogsOnError
	maxPodTerminationMessageSize = 12 * 1024 // shared by a pod's containers
)

// logFile is the log of run number run of the container whose directory is dir: stdout and
// stderr together, one file per run so that the previous run's log stays readable.
func logFile(dir string, run int) string { return filepath.Join(dir, fmt.Sprintf("%d.log", run)) }

// terminationMessage reads what run number run of c left at TERMINATION_MESSAGE_PATH (the
// agent's stand-in for c.TerminationMessagePath) as the kubelet does: the file's last 4096
// bytes; with FallbackToLogsOnError and a non-zero exit, an empty file gives the last 80 lines
// (at most 2048 bytes) of the log instead; the pod's 12 KiB are then shared among its containers.
func (p *pod) terminationMessage(c *corev1.Container, run int, exitCode int32) string {
	dir := filepath.Join(p.dir, c.Name)
	msg, err := readTail(filepath.Join(dir, "termination-log"), maxTerminationMessage)
	if err != nil && !os.IsNotExist(err) {
		return fmt.Sprintf("Error on reading termination log: %v", err)
	}
	if len(msg) == 0 && c.TerminationMessagePolicy == corev1.TerminationMessageFallbackToLogsOnError && exitCode != 0 {
		msg = tailLines(logFile(dir, run), maxTerminationMessageLines, maxTerminationMessageLogs)
	}
	if limit := maxPodTerminationMessageSize / max(len(p.specs), 1); len(msg) > limit {
		msg = msg[:limit]
	}
	return string(msg)
}

// readTail returns the last n bytes of the file at path.
func readTail(path string, n int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if st.Size() > n {
		if _, err := f.Seek(-n, io.SeekEnd); err != nil {
			return nil, err
		}
	}
	return io.ReadAll(f)
}

// tailLines returns the last lines lines of the file at path, at most maxBytes of them (the end).
func tailLines(path string, lines int, maxBytes int64) []byte {
	b, err := readTail(path, 1<<20)
	if err != nil {
		return nil
	}
	b = lastLines(b, lines)
	if int64(len(b)) > maxBytes {
		b = b[int64(len(b))-maxBytes:]
	}
	return b
}

// containerLogPath is the log file of a container's current run (previous: the run before).
func (p *pod) containerLogPath(container string, previous bool) (string, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for i, c := range p.specs {
		if c.Name != container {
			continue
		}
		run := p.logIndex[i]
		if previous {
			if run == 0 {
				return "", fmt.Errorf("previous terminated container %q in pod %q not found", container, p.obj.Name)
			}
			run--
		}
		return logFile(filepath.Join(p.dir, c.Name), run), nil
	}
	return "", fmt.Errorf("container %q is not in pod %q", container, p.obj.Name)
}
