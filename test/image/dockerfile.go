// Package image tests the manager's container image that internal/image builds (`make image`),
// and that the Dockerfile describes the same image.
package image

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path"
	"strings"
)

// stage is one FROM ... stage of a Dockerfile, its instructions with line continuations joined.
type stage struct {
	from, name   string
	instructions []instruction
}

// instruction is one Dockerfile instruction: its upper-case keyword and the rest of the line.
type instruction struct {
	keyword, args string
}

// parseDockerfile splits the Dockerfile at file into stages. It understands what this
// repository's Dockerfile uses: comments, blank lines, backslash continuations, FROM x [AS y].
func parseDockerfile(file string) ([]stage, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var stages []stage
	var pending string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if pending == "" && (line == "" || strings.HasPrefix(line, "#")) {
			continue
		}
		if cont, ok := strings.CutSuffix(line, "\\"); ok {
			pending += cont + " "
			continue
		}
		line, pending = pending+line, ""
		keyword, args, _ := strings.Cut(line, " ")
		ins := instruction{keyword: strings.ToUpper(keyword), args: strings.TrimSpace(args)}
		if ins.keyword == "FROM" {
			fields := strings.Fields(ins.args)
			st := stage{from: fields[0]}
			if len(fields) == 3 && strings.EqualFold(fields[1], "AS") {
				st.name = fields[2]
			}
			stages = append(stages, st)
			continue
		}
		if len(stages) == 0 {
			if ins.keyword == "ARG" {
				continue
			}
			return nil, fmt.Errorf("%s before the first FROM", ins.keyword)
		}
		stages[len(stages)-1].instructions = append(stages[len(stages)-1].instructions, ins)
	}
	return stages, sc.Err()
}

// copied is one file a COPY puts into an image.
type copied struct {
	// from is the stage it comes from, "" for the build context.
	from string
	// src is its path in that stage or the build context; dst its absolute path in the image.
	src, dst string
}

// copies returns the files the stage's COPY instructions put in place. A destination ending in
// "/" receives each source under its base name; otherwise there must be one source.
func (s stage) copies() ([]copied, error) {
	var out []copied
	for _, ins := range s.instructions {
		if ins.keyword != "COPY" {
			continue
		}
		var from string
		var paths []string
		for _, f := range strings.Fields(ins.args) {
			if v, ok := strings.CutPrefix(f, "--from="); ok {
				from = v
			} else if strings.HasPrefix(f, "--") {
				return nil, fmt.Errorf("COPY %s: flag %s not understood", ins.args, f)
			} else {
				paths = append(paths, f)
			}
		}
		if len(paths) < 2 {
			return nil, fmt.Errorf("COPY %s: want sources and a destination", ins.args)
		}
		srcs, dst := paths[:len(paths)-1], paths[len(paths)-1]
		if !strings.HasSuffix(dst, "/") && len(srcs) > 1 {
			return nil, fmt.Errorf("COPY %s: several sources need a folder destination", ins.args)
		}
		for _, src := range srcs {
			d := dst
			if strings.HasSuffix(dst, "/") {
				d = dst + path.Base(src)
			}
			out = append(out, copied{from: from, src: src, dst: d})
		}
	}
	return out, nil
}

// last returns the args of the stage's last instruction with keyword, and whether there is one
// (a later USER or ENTRYPOINT overrides an earlier one).
func (s stage) last(keyword string) (string, bool) {
	for i := len(s.instructions) - 1; i >= 0; i-- {
		if s.instructions[i].keyword == keyword {
			return s.instructions[i].args, true
		}
	}
	return "", false
}

// entrypoint returns the stage's ENTRYPOINT in exec form (a JSON array); shell form is an error,
// since it needs /bin/sh.
func (s stage) entrypoint() ([]string, error) {
	args, ok := s.last("ENTRYPOINT")
	if !ok {
		return nil, fmt.Errorf("no ENTRYPOINT")
	}
	var ep []string
	if err := json.Unmarshal([]byte(args), &ep); err != nil {
		return nil, fmt.Errorf("ENTRYPOINT %s: not exec form: %w", args, err)
	}
	return ep, nil
}

// labels returns the stage's LABEL key="value" pairs, quotes removed. Values must not hold
// spaces (this repository's do not).
func (s stage) labels() map[string]string {
	labels := map[string]string{}
	for _, ins := range s.instructions {
		if ins.keyword != "LABEL" {
			continue
		}
		for _, f := range strings.Fields(ins.args) {
			if k, v, ok := strings.Cut(f, "="); ok {
				labels[k] = strings.Trim(v, `"`)
			}
		}
	}
	return labels
}
