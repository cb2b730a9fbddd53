package release

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"helm.sh/helm/v4/pkg/chart/common"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	chartutil "helm.sh/helm/v4/pkg/chart/v2/util"
	repo "helm.sh/helm/v4/pkg/repo/v1"
	"sigs.k8s.io/yaml"
)

// packageChart loads the chart at dir with the Helm library, sets its version (version without
// the "v") and appVersion (version as given, the image tag) and the image the chart installs
// (values image.repository, image.tag and image.digest), stamps every file with
// modTime and saves it into outDir as <name>-<version>.tgz. It returns the archive's path.
// The CRD stays in the chart's crds/ folder: Helm installs it once and never deletes or upgrades
// it (docs/install.md).
func packageChart(dir, outDir, version, imageRepo, digest string, modTime time.Time) (string, error) {
	c, err := loader.LoadDir(dir)
	if err != nil {
		return "", fmt.Errorf("loading the chart %s: %w", dir, err)
	}
	c.Metadata.Version = strings.TrimPrefix(version, "v")
	c.Metadata.AppVersion = version
	found := false
	for _, f := range c.Raw {
		if f.Name != chartutil.ValuesfileName {
			continue
		}
		data, err := setImage(f.Data, imageRepo, version, digest)
		if err != nil {
			return "", err
		}
		f.Data = data
		vals, err := common.ReadValues(data)
		if err != nil {
			return "", err
		}
		c.Values = vals
		found = true
	}
	if !found {
		return "", fmt.Errorf("the chart %s has no values.yaml to set the image in", dir)
	}
	c.StampModTimes(modTime.UTC())
	path, err := chartutil.Save(c, outDir)
	if err != nil {
		return "", fmt.Errorf("packaging the chart: %w", err)
	}
	return path, nil
}

// setImage rewrites the first "repository:", "tag:" and "digest:" lines under the top-level
// "image:" key of values.yaml to repository, tag and digest, keeping every comment and the rest of
// the file as it is. Errors: no image block with the three keys.
func setImage(values []byte, repository, tag, digest string) ([]byte, error) {
	lines := strings.Split(string(values), "\n")
	inImage, setRepo, setTag, setDigest := false, false, false, false
	for i, l := range lines {
		if strings.HasPrefix(l, "image:") {
			inImage = true
			continue
		}
		if inImage && l != "" && !strings.HasPrefix(l, " ") && !strings.HasPrefix(l, "#") {
			break
		}
		if !inImage {
			continue
		}
		indent := l[:len(l)-len(strings.TrimLeft(l, " "))]
		switch t := strings.TrimSpace(l); {
		case !setRepo && strings.HasPrefix(t, "repository:"):
			lines[i] = indent + "repository: " + quote(repository)
			setRepo = true
		case !setTag && strings.HasPrefix(t, "tag:"):
			lines[i] = indent + "tag: " + quote(tag)
			setTag = true
		case !setDigest && strings.HasPrefix(t, "digest:"):
			lines[i] = indent + "digest: " + quote(digest)
			setDigest = true
		}
	}
	if !setRepo || !setTag || !setDigest {
		return nil, fmt.Errorf("the chart's values.yaml has no image.repository, image.tag and image.digest to set")
	}
	return []byte(strings.Join(lines, "\n")), nil
}

func quote(s string) string {
	b, _ := yaml.Marshal(s)
	return strings.TrimSpace(string(b))
}

// chartIndex writes the chart repository index for the packaged chart at path: one entry whose
// URL is downloadBase + the archive's name, its sha256 digest, and generated and created times
// set to modTime, so that the same chart gives the same index.yaml.
func chartIndex(path, downloadBase string, modTime time.Time) ([]byte, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	c, err := loader.LoadArchive(bytes.NewReader(data))
	if err != nil {
		return nil, fmt.Errorf("reading back %s: %w", path, err)
	}
	sum := sha256.Sum256(data)
	idx := repo.NewIndexFile()
	if err := idx.MustAdd(c.Metadata, filepath.Base(path), downloadBase, hex.EncodeToString(sum[:])); err != nil {
		return nil, err
	}
	idx.Generated = modTime.UTC()
	for _, versions := range idx.Entries {
		for _, v := range versions {
			v.Created = modTime.UTC()
		}
	}
	idx.SortEntries()
	return yaml.Marshal(idx)
}
