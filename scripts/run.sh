#!/usr/bin/env bash
# Installs, builds and generates text with the bundled model (models/tessera-kjv, trained by
# scripts/train_small_model.py on the King James Bible), or with a model directory given as $1.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
if [ -n "${1:-}" ]; then
  ./build/tessera generate -m "$1" -p "${2:-Once upon a time}" -n 64
else
  ./build/tessera generate -p "Genesis 1:1 In the beginning" -n 64 --temperature 0
fi
