package image

import (
	"context"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"time"
)

// Metadata is what the image says about where it comes from. Every field ends up in the image
// config (labels and the created time), so two builds of the same commit with the same Metadata
// give the same digests.
type Metadata struct {
	// Revision is the git commit the image is built from (40 hex digits), label LabelRevision.
	Revision string
	// Version is a human version, label LabelVersion: `git describe --tags --always --dirty`
	// by default, so a build from a modified tree says "-dirty".
	Version string
	// Created is the image's creation time, whole seconds in UTC; it is also every file's
	// modification time in the layers. From SOURCE_DATE_EPOCH (reproducible-builds.org) when
	// set, else the commit time, never the wall clock.
	Created time.Time
}

// Labels returns the image config labels for m: source, licenses, revision and version (the
// created time is the config's own "created" field).
func (m Metadata) Labels() map[string]string {
	return map[string]string{
		LabelSource:   SourceURL,
		LabelLicenses: License,
		LabelRevision: m.Revision,
		LabelVersion:  m.Version,
	}
}

// MetadataFromGit reads the Metadata of the checkout at dir with git. sourceDateEpoch is the
// value of SOURCE_DATE_EPOCH (decimal seconds since 1970, UTC) or "" to use the commit time of
// HEAD. Errors: git missing or dir not in a repository, or a malformed sourceDateEpoch.
func MetadataFromGit(ctx context.Context, dir, sourceDateEpoch string) (Metadata, error) {
	var m Metadata
	var err error
	if m.Revision, err = git(ctx, dir, "rev-parse", "HEAD"); err != nil {
		return m, err
	}
	if m.Version, err = git(ctx, dir, "describe", "--tags", "--always", "--dirty"); err != nil {
		return m, err
	}
	epoch := sourceDateEpoch
	if epoch == "" {
		if epoch, err = git(ctx, dir, "log", "-1", "--format=%ct", "HEAD"); err != nil {
			return m, err
		}
	}
	secs, err := strconv.ParseInt(epoch, 10, 64)
	if err != nil {
		return m, fmt.Errorf("created time %q: want decimal seconds since the epoch: %w", epoch, err)
	}
	m.Created = time.Unix(secs, 0).UTC()
	return m, nil
}

// git runs git with args in dir and returns its trimmed standard output.
func git(ctx context.Context, dir string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "git", args...)
	cmd.Dir = dir
	out, err := cmd.Output()
	if err != nil {
		var stderr string
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = strings.TrimSpace(string(ee.Stderr))
		}
		return "", fmt.Errorf("git %s: %w %s", strings.Join(args, " "), err, stderr)
	}
	return strings.TrimSpace(string(out)), nil
}
