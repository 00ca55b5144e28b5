#!/usr/bin/env bash
# Prints the path of pgmq's install script, downloading the pgmq crate (which embeds the extension's
# SQL) from crates.io on first use. Nothing of pgmq is kept in this repository.
set -euo pipefail
VERSION=0.33.7
SHA256=50eb534c14338bf3c0048606af7ea9fbf32f674debe392f9267eeeddf0582d1d
DIR=${1:-target/bench}
SQL=$DIR/pgmq-$VERSION/src/install/embedded/sql/pgmq.sql
if [ ! -f "$SQL" ]; then
  mkdir -p "$DIR"
  curl -fsSL -o "$DIR/pgmq.crate" "https://static.crates.io/crates/pgmq/pgmq-$VERSION.crate"
  echo "$SHA256  $DIR/pgmq.crate" | sha256sum -c --quiet -
  tar -xzf "$DIR/pgmq.crate" -C "$DIR"
fi
echo "$SQL"
