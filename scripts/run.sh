#!/usr/bin/env bash
# Installs, builds, generates text with the bundled model (models/tessera-kjv, trained by
# scripts/train_small_model.py on the King James Bible), then serves it over the OpenAI API on
# http://127.0.0.1:8080 until interrupted. With a model directory as $1, uses that model instead.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
model=()
[ -n "${1:-}" ] && model=(-m "$1")
./build/tessera generate "${model[@]}" -p "${2:-Genesis 1:1 In the beginning}" -n 64 --temperature 0
echo
echo "Serving on http://127.0.0.1:8080 (Ctrl-C stops). Try:"
echo "  curl http://127.0.0.1:8080/v1/chat/completions -H 'Content-Type: application/json' \\"
echo "    -d '{\"messages\": [{\"role\": \"user\", \"content\": \"Read Psalms 23:1-2.\"}], \"max_tokens\": 64}'"
exec ./build/tessera serve "${model[@]}"
