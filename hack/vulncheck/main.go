// Command vulncheck is the gate of `make vulncheck`: it reads govulncheck's JSON stream
// (-format json) on stdin and fails when the code calls a vulnerable function that
// hack/vulncheck/accepted.txt does not accept, or when that file accepts one the code no longer
// calls (stale: remove it). A vulnerability in a package the code imports or a module it requires,
// but whose vulnerable function it never calls, is listed and does not fail.
//
// accepted.txt has one vulnerability per line, "<OSV id> <reason>", and # comments. Accept only
// what cannot be fixed here, and say why: for the standard library, which Go release fixes it.
package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
)

// finding is the part of govulncheck's "finding" message the gate reads.
type finding struct {
	OSV          string `json:"osv"`
	FixedVersion string `json:"fixed_version"`
	Trace        []struct {
		Module   string `json:"module"`
		Version  string `json:"version"`
		Package  string `json:"package"`
		Function string `json:"function"`
	} `json:"trace"`
}

type message struct {
	Finding *finding `json:"finding"`
}

// vuln is one OSV entry as the findings describe it.
type vuln struct {
	module, found, fixed string
	called               bool
}

func main() {
	acceptedPath := flag.String("accepted", "hack/vulncheck/accepted.txt", "the vulnerabilities accepted, one per line: <OSV id> <reason>")
	flag.Parse()
	accepted, err := readAccepted(*acceptedPath)
	if err != nil {
		fmt.Fprintln(os.Stderr, "vulncheck:", err)
		os.Exit(2)
	}
	vulns, err := readFindings(os.Stdin)
	if err != nil {
		fmt.Fprintln(os.Stderr, "vulncheck: reading govulncheck's JSON:", err)
		os.Exit(2)
	}
	if failed := report(os.Stdout, vulns, accepted); failed {
		os.Exit(1)
	}
}

// readAccepted reads the accepted list: id → reason.
func readAccepted(path string) (map[string]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }()
	out := map[string]string{}
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		id, reason, _ := strings.Cut(line, " ")
		if !strings.HasPrefix(id, "GO-") || strings.TrimSpace(reason) == "" {
			return nil, fmt.Errorf("%s:%d: want \"<GO-id> <reason>\", got %q", path, n, line)
		}
		out[id] = strings.TrimSpace(reason)
	}
	return out, sc.Err()
}

// readFindings reads govulncheck's stream of JSON messages and gathers the findings by OSV id.
// A finding is called when the first frame of its trace names a function.
func readFindings(r io.Reader) (map[string]*vuln, error) {
	out := map[string]*vuln{}
	dec := json.NewDecoder(r)
	for {
		var m message
		err := dec.Decode(&m)
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
		f := m.Finding
		if f == nil || f.OSV == "" {
			continue
		}
		v := out[f.OSV]
		if v == nil {
			v = &vuln{fixed: f.FixedVersion}
			out[f.OSV] = v
		}
		if len(f.Trace) > 0 {
			v.module, v.found = f.Trace[0].Module, f.Trace[0].Version
			v.called = v.called || f.Trace[0].Function != ""
		}
	}
}

// report writes one line per vulnerability and whether it fails the gate; failed is true when a
// called one is not accepted or an accepted one is not called.
func report(w io.Writer, vulns map[string]*vuln, accepted map[string]string) (failed bool) {
	ids := make([]string, 0, len(vulns))
	for id := range vulns {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		v := vulns[id]
		where := fmt.Sprintf("%s %s (fixed in %s)", v.module, v.found, orNone(v.fixed))
		switch {
		case !v.called:
			_, _ = fmt.Fprintf(w, "not called  %s %s\n", id, where)
		case accepted[id] != "":
			_, _ = fmt.Fprintf(w, "accepted    %s %s: %s\n", id, where, accepted[id])
		default:
			failed = true
			_, _ = fmt.Fprintf(w, "CALLED      %s %s: upgrade, or accept it in hack/vulncheck/accepted.txt saying why\n", id, where)
		}
	}
	stale := make([]string, 0, len(accepted))
	for id := range accepted {
		if v := vulns[id]; v == nil || !v.called {
			stale = append(stale, id)
		}
	}
	sort.Strings(stale)
	for _, id := range stale {
		failed = true
		_, _ = fmt.Fprintf(w, "STALE       %s is accepted but no longer called: remove it from hack/vulncheck/accepted.txt\n", id)
	}
	return failed
}

func orNone(s string) string {
	if s == "" {
		return "none yet"
	}
	return s
}
