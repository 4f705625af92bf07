#!/bin/bash
# Assembles the benchmark's mixed text (about 4 MB) from files a Debian system carries:
# English prose (licenses), C++ source (libstdc++ headers), man pages translated into many
# languages (ja, ko, zh_CN, ru, de, fr, pl, ...) and the Unicode emoji test list.
# Usage: bench_text.sh OUT_FILE
set -euo pipefail
out=${1:?usage: bench_text.sh OUT_FILE}
{
  cat /usr/share/common-licenses/{Apache-2.0,GPL-3,LGPL-3,MPL-2.0,Artistic} 2>/dev/null || true
  find /usr/include/c++ -path '*bits/*.h' 2>/dev/null | sort | xargs cat 2>/dev/null | head -c 1200000 || true
  for lang in ja ko zh_CN ru de fr pl cs uk es pt_BR sv tr it hu; do
    find /usr/share/man/$lang -name '*.gz' 2>/dev/null | sort | xargs -r zcat 2>/dev/null | head -c 160000 || true
  done
  head -c 400000 /usr/share/unicode/emoji/emoji-test.txt 2>/dev/null || true
} > "$out"
ls -l "$out"
