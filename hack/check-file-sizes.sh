#!/usr/bin/env bash
# Fails when a file git tracks (or is about to commit) is larger than MAX_FILE_BYTES (default
# 4 MiB). A built binary committed by mistake (kubectl-schemagate, 130 MB, in c93d5f6) made a
# later submission, which rebuilt it, too big to land: builds belong in bin/ or /tmp, and data a
# script can make again stays out of the repository.
#
# Usage: hack/check-file-sizes.sh            (run by `make verify`)
set -euo pipefail
max=${MAX_FILE_BYTES:-4194304}
cd "$(dirname "$0")/.."
big=$(git ls-files -z --cached --others --exclude-standard | xargs -0 -r stat -c '%s %n' 2>/dev/null |
  awk -v max="$max" '$1 > max' || true)
if [ -n "$big" ]; then
  echo "files over $max bytes (build into bin/ or /tmp, or ignore them in .gitignore):" >&2
  echo "$big" >&2
  exit 1
fi
