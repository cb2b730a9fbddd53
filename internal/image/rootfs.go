package image

import "embed"

// RootfsDir is the folder, relative to the module root, whose etc/passwd and etc/group the image
// holds byte for byte. The Dockerfile copies them from there; this package embeds them.
const RootfsDir = "internal/image/rootfs"

// rootfs holds etc/passwd (root and nonroot 65532, both with /sbin/nologin) and etc/group.
//
//go:embed rootfs/etc/passwd rootfs/etc/group
var rootfs embed.FS

// etcFile returns the embedded file rootfs/etc/<name>; name is "passwd" or "group".
func etcFile(name string) ([]byte, error) {
	return rootfs.ReadFile("rootfs/etc/" + name)
}
