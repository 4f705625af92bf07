#!/usr/bin/env bash
# Installs what Tessera needs on Debian 12 (idempotent; as root or with sudo) and builds it into build/.
# Usage: scripts/setup.sh [--no-build]
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(build-essential cmake ninja-build pkg-config ca-certificates
          nlohmann-json3-dev libpcre2-dev libutf8proc-dev libopenblas-dev libcpp-httplib-dev
          libcli11-dev libgtest-dev libgmock-dev libbenchmark-dev)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
# The tests' tools run on Node.js. A machine that already has node and npm (e.g. from another
# repository, whose nodejs bundles npm and conflicts with Debian's npm) keeps them.
command -v node >/dev/null || missing+=(nodejs)
command -v npm >/dev/null || missing+=(npm)
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

[ "${1:-}" = "--no-build" ] && exit 0

jobs=$(nproc)
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release ${TESSERA_CMAKE_ARGS:-}
cmake --build build -j "$jobs"
