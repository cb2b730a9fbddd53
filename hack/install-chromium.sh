#!/usr/bin/env bash
# Makes sure a headless-capable Chromium is installed for the dashboard's browser tests
# (TestDashboardInABrowser in test/e2e, the `browser`-tagged golden test of cmd/kubectl-schemagate).
#
# Looks for `chromium`, then `chromium-browser`, on $PATH. If neither is there, installs Debian's
# chromium package (through sudo unless run as root; ~1.5 min and ~300 MB on a fresh machine).
# Nothing is downloaded but the distribution's package: no browser build of a test tool's own.
# Running it again changes nothing.
#
# Usage: hack/install-chromium.sh
# Prints the browser's path as its last line.
set -euo pipefail

find_browser() {
  local name
  for name in chromium chromium-browser; do
    if command -v "$name" >/dev/null 2>&1; then
      command -v "$name"
      return 0
    fi
  done
  return 1
}

if browser=$(find_browser); then
  echo "$browser"
  exit 0
fi

if ! command -v apt-get >/dev/null 2>&1; then
  echo "install-chromium: no chromium on PATH, and no apt-get to install it: install Chromium (or set CHROMIUM to its path)" >&2
  exit 1
fi
sudo=()
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null 2>&1 || { echo "install-chromium: not root and no sudo: run as root" >&2; exit 1; }
  sudo=(sudo)
fi

echo "install-chromium: installing Debian's chromium package" >&2
apt_install() {
  "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends chromium >&2
}
if ! apt_install; then
  "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update >&2
  apt_install
fi

if ! browser=$(find_browser); then
  echo "install-chromium: installed chromium, but found none on PATH" >&2
  exit 1
fi
echo "$browser"
