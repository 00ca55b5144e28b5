#!/usr/bin/env bash
# Installs a staged tree (scripts/stage.sh) into the system PostgreSQL without rewriting any file in
# place: each file is written beside its destination and renamed over it, as dpkg does.
#   scripts/install.sh STAGE
# Why: a backend maps the library it loaded. Rewriting that same file (what a plain copy over it
# does) changes code under every running backend, which can kill one with SIGBUS and send the
# server through crash recovery. A rename leaves running backends with the file they mapped, and
# every backend started afterwards, or after a restart, loads the new one.
set -euo pipefail

stage=${1:?usage: install.sh STAGE}
as_root() {
  if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi
}

(cd "$stage" && find . -type f) | while read -r file; do
  dest=/${file#./}
  mode=644
  [[ $dest == *.so ]] && mode=755
  as_root install -d -m 755 "$(dirname "$dest")"
  # The new file beside the old one, on the same file system, so the rename is atomic.
  next="$(dirname "$dest")/.$(basename "$dest").new"
  as_root install -m "$mode" "$stage/${file#./}" "$next"
  as_root mv -f "$next" "$dest"
done
