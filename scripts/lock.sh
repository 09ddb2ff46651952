#!/usr/bin/env bash
# Re-resolve requirements-lock.txt: the exact version of every package a fresh install of
# requirements-dev.txt (which includes requirements.txt and requirements-ray.txt) gets today.
# Both README commands and CI (scripts/test.sh) install with `-c requirements-lock.txt`, so a
# fresh machine installs what CI tested. Run this after editing a requirements file, or to take
# newer releases; commit the new lock only once `bash scripts/test.sh` passes with it.
# Extra arguments go to pip-compile (for example `--upgrade-package transformers` alone,
# with `--no-upgrade` first to keep the other pins).
set -euo pipefail
cd "$(dirname "$0")/.."
tools=$(mktemp -d)
trap 'rm -rf "$tools"' EXIT
# pip-tools in a throwaway venv: it resolves with pip itself, so pip's configuration (indexes,
# find-links such as a local CPU build of torch) applies as it does to `pip install`; the lock
# itself names no index, so it reads the same on every machine.
python3 -m venv "$tools"
"$tools/bin/python" -m pip install -q pip-tools
CUSTOM_COMPILE_COMMAND="bash scripts/lock.sh" "$tools/bin/pip-compile" -q --strip-extras --no-emit-index-url --no-emit-find-links --upgrade "$@" \
  --output-file requirements-lock.txt requirements-dev.txt
# torch without its local label (2.13.0+cpu -> 2.13.0): `==2.13.0` admits the CPU build found
# here and a user's CUDA build alike, where `==2.13.0+cpu` exists only on PyTorch's own index.
sed -i -E 's/^torch==([^+ ]+)\+[A-Za-z0-9.]+/torch==\1/' requirements-lock.txt
