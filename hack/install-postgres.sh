#!/usr/bin/env bash
# Makes sure PostgreSQL 15 or later is installed for the tests (test/postgres starts its own server
# from these binaries: initdb, then postgres on a free port of 127.0.0.1).
#
# Looks for initdb and postgres as test/postgres does: the directory `pg_config --bindir` names,
# else the newest /usr/lib/postgresql/<version>/bin, else initdb's directory on $PATH (symbolic
# links resolved). If none holds both at version 15 or later, installs Debian's postgresql package
# (through sudo unless run as root), told not to create or start a cluster of its own. Running it
# again changes nothing.
#
# Usage: hack/install-postgres.sh
# Prints the directory holding the binaries as its last line.
set -euo pipefail

min_major=15

# usable DIR: DIR holds initdb and postgres of version min_major or later.
usable() {
  local dir=$1 version
  [ -n "$dir" ] && [ -x "$dir/initdb" ] && [ -x "$dir/postgres" ] || return 1
  version=$("$dir/postgres" --version 2>/dev/null | sed -n 's/.*(PostgreSQL) \([0-9][0-9]*\).*/\1/p')
  [ -n "$version" ] && [ "$version" -ge "$min_major" ]
}

find_bindir() {
  local dir
  if command -v pg_config >/dev/null 2>&1; then
    dir=$(pg_config --bindir 2>/dev/null || true)
    if usable "$dir"; then echo "$dir"; return 0; fi
  fi
  for dir in $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -t/ -k5,5 -V -r); do
    if usable "$dir"; then echo "$dir"; return 0; fi
  done
  if command -v initdb >/dev/null 2>&1; then
    dir=$(dirname "$(readlink -f "$(command -v initdb)")")
    if usable "$dir"; then echo "$dir"; return 0; fi
  fi
  return 1
}

if bindir=$(find_bindir); then
  echo "$bindir"
  exit 0
fi

if ! command -v apt-get >/dev/null 2>&1; then
  echo "install-postgres: no PostgreSQL $min_major+ initdb and postgres found, and no apt-get to install them: install PostgreSQL $min_major or later" >&2
  exit 1
fi
sudo=()
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null 2>&1 || { echo "install-postgres: not root and no sudo: run as root" >&2; exit 1; }
  sudo=(sudo)
fi

echo "install-postgres: installing Debian's postgresql package" >&2
# The tests start their own servers: the package must not create (and start) the main cluster.
"${sudo[@]}" mkdir -p /etc/postgresql-common/createcluster.d
echo 'create_main_cluster = false' | "${sudo[@]}" tee /etc/postgresql-common/createcluster.d/schemagate.conf >/dev/null
apt_install() {
  "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends postgresql >&2
}
if ! apt_install; then
  "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update >&2
  apt_install
fi

if ! bindir=$(find_bindir); then
  echo "install-postgres: installed postgresql, but found no PostgreSQL $min_major+ initdb and postgres" >&2
  exit 1
fi
echo "$bindir"
