#!/usr/bin/env bash
# Installs, builds and generates text with the bundled model (or a model directory given as $1).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
model="${1:-}"
if [ -z "$model" ]; then
  if [ -d ../shared/reference/models/stories260K ]; then
    model=../shared/reference/models/stories260K
  else
    echo "run: no model given and none bundled yet; pass a Hugging Face model directory: scripts/run.sh DIR" >&2
    exit 2
  fi
fi
./build/tessera generate -m "$model" --prompt-ids "1" -n 128 --temperature 0 --output-ids
