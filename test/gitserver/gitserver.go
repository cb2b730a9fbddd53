// Package gitserver serves Git repositories over smart HTTP on loopback for the GitOps stories:
// Git's own `git http-backend` behind net/http/cgi, so a GitOps controller clones exactly as it
// would from a forge. A test writes commits with Repo.Commit; nothing is pushed over the network.
package gitserver

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/cgi"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
)

// Branch is the branch every repository is created with and Commit writes to.
const Branch = "main"

// Server serves the bare repositories under its root folder at http://127.0.0.1:<port>/<name>.git.
type Server struct {
	root string
	url  string
	srv  *http.Server
}

// Start serves a new temporary root on a free loopback port. It fails when git or its
// http-backend is missing (Debian's git package has both).
func Start(ctx context.Context) (*Server, error) {
	backend, err := httpBackend(ctx)
	if err != nil {
		return nil, err
	}
	root, err := os.MkdirTemp("", "schemagate-git-")
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	h := &cgi.Handler{Path: backend, Root: "/", Env: []string{
		"GIT_PROJECT_ROOT=" + root,
		"GIT_HTTP_EXPORT_ALL=1", // serve repositories without a git-daemon-export-ok file
	}}
	s := &Server{root: root, url: "http://" + ln.Addr().String(), srv: &http.Server{Handler: h}}
	go func() { _ = s.srv.Serve(ln) }()
	return s, nil
}

// httpBackend is the path of `git http-backend` (git --exec-path holds it).
func httpBackend(ctx context.Context) (string, error) {
	out, err := exec.CommandContext(ctx, "git", "--exec-path").Output()
	if err != nil {
		return "", fmt.Errorf("git --exec-path: %w (is git installed?)", err)
	}
	p := filepath.Join(strings.TrimSpace(string(out)), "git-http-backend")
	if _, err := os.Stat(p); err != nil {
		return "", fmt.Errorf("git http-backend: %w", err)
	}
	return p, nil
}

// Stop stops serving and removes every repository.
func (s *Server) Stop() {
	_ = s.srv.Close()
	_ = os.RemoveAll(s.root)
}

// Repo is one repository: a bare repository the server serves, and a work tree beside it that
// Commit writes and pushes from.
type Repo struct {
	// URL is where a client clones it from.
	URL  string
	bare string
	work string
	mu   sync.Mutex
}

// NewRepo creates an empty repository name (letters, digits and dashes) on branch main.
func (s *Server) NewRepo(ctx context.Context, name string) (*Repo, error) {
	r := &Repo{URL: s.url + "/" + name + ".git", bare: filepath.Join(s.root, name+".git"), work: filepath.Join(s.root, "work", name)}
	if err := git(ctx, "", "init", "--quiet", "--bare", "--initial-branch="+Branch, r.bare); err != nil {
		return nil, err
	}
	if err := git(ctx, "", "init", "--quiet", "--initial-branch="+Branch, r.work); err != nil {
		return nil, err
	}
	return r, git(ctx, r.work, "remote", "add", "origin", r.bare)
}

// Commit makes the repository's tree exactly files (path relative to the root → content),
// commits it with message and pushes it to the served repository. It returns the commit's SHA-1
// (what a GitOps controller reports as the revision it applied).
func (r *Repo) Commit(ctx context.Context, message string, files map[string][]byte) (string, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := git(ctx, r.work, "rm", "-r", "--quiet", "--ignore-unmatch", "--cached", "."); err != nil {
		return "", err
	}
	entries, err := os.ReadDir(r.work)
	if err != nil {
		return "", err
	}
	for _, e := range entries {
		if e.Name() != ".git" {
			if err := os.RemoveAll(filepath.Join(r.work, e.Name())); err != nil {
				return "", err
			}
		}
	}
	paths := make([]string, 0, len(files))
	for p := range files {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	for _, p := range paths {
		full := filepath.Join(r.work, filepath.FromSlash(p))
		if !strings.HasPrefix(full, r.work+string(filepath.Separator)) {
			return "", fmt.Errorf("path %q leaves the repository", p)
		}
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			return "", err
		}
		if err := os.WriteFile(full, files[p], 0o644); err != nil {
			return "", err
		}
	}
	if err := git(ctx, r.work, "add", "--all"); err != nil {
		return "", err
	}
	if err := git(ctx, r.work, "commit", "--quiet", "--allow-empty", "-m", message); err != nil {
		return "", err
	}
	if err := git(ctx, r.work, "push", "--quiet", "origin", Branch); err != nil {
		return "", err
	}
	out, err := exec.CommandContext(ctx, "git", "-C", r.work, "rev-parse", "HEAD").Output()
	if err != nil {
		return "", fmt.Errorf("git rev-parse HEAD: %w", err)
	}
	return strings.TrimSpace(string(out)), nil
}

// git runs git in dir (none: the current folder) with a fixed identity and no user or system
// configuration, so a developer's settings (signing, hooks, templates) change nothing.
func git(ctx context.Context, dir string, args ...string) error {
	if dir != "" {
		args = append([]string{"-C", dir}, args...)
	}
	cmd := exec.CommandContext(ctx, "git", args...)
	cmd.Env = append(os.Environ(),
		"GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null",
		"GIT_AUTHOR_NAME=schemagate tests", "GIT_AUTHOR_EMAIL=tests@schemagate.invalid",
		"GIT_COMMITTER_NAME=schemagate tests", "GIT_COMMITTER_EMAIL=tests@schemagate.invalid")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("git %s: %w: %s", strings.Join(args, " "), err, out)
	}
	return nil
}
