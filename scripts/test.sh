#!/usr/bin/env bash
# Install bioviz with its test dependencies into .venv and run the whole test suite.
# Works on a fresh machine with python3 and the package registries; installs Debian's
# chromium for the real-browser tests when it is missing and we are allowed to.
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip >/dev/null
# -c requirements-lock.txt: the exact versions CI tested (scripts/lock.sh re-resolves them)
.venv/bin/python -m pip install -q -r requirements-dev.txt -c requirements-lock.txt
if ! command -v chromium >/dev/null 2>&1 && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null) \
    || echo "warning: could not install chromium; browser tests will be skipped" >&2
fi
export HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false
# Two worker processes by default (pytest-xdist; the tests sharing the browser server or the Ray head stay in one
# worker, tests/conftest.py): about 16-22 min instead of 24-29 on 2 cores. BIOVIZ_TEST_WORKERS=1: one process.
# --durations: the slowest tests listed at the end of every CI log.
workers=${BIOVIZ_TEST_WORKERS:-2}
parallel=()
if [ "$workers" != 1 ]; then parallel=(-n "$workers"); fi
exec .venv/bin/python -m pytest "${parallel[@]}" --durations=25 "$@"
