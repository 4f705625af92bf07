#!/usr/bin/env bash
# Builds the CUDA backend, its tests and the GPU benchmark, and runs them all on this machine's
# GPU in one go. Logs go to $LOG_DIR (default build-gpu/gpu-logs/); the summary is printed last.
#   scripts/gpu_run.sh                build in $BUILD_DIR (default build-gpu/), then run
#   scripts/gpu_run.sh --bundle DIR   build, then copy the programs, the plugin and the C++ runtime
#                                     into DIR, for a GPU machine without the build dependencies
#   scripts/gpu_run.sh --from DIR     run from such a bundle (from the repository root, whose
#                                     tests/fixtures the model tests read)
# cuBLASLt (libcublasLt.so.13) comes from the GPU machine: the CUDA toolkit or pip's nvidia-cublas.
set -uo pipefail

repo=$(pwd)
build_dir=${BUILD_DIR:-$repo/build-gpu}
log_dir=${LOG_DIR:-$build_dir/gpu-logs}
programs=(test_cuda_ops test_cuda_models bench_cuda bench_load bench_engine test_backend_ops test_models tessera)

build() {
  local dir=$1
  cmake -S "$repo" -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null || exit 1
  cmake --build "$dir" -j"$(nproc)" --target tessera_cuda "${programs[@]}" || exit 1
}

# Directories holding libcublasLt.so.13 on this machine.
cublas_dirs() {
  ldconfig -p 2>/dev/null | awk '/libcublasLt\.so\.13/ {print $NF}' | xargs -r -n1 dirname
  for d in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib; do
    [ -e "$d/libcublasLt.so.13" ] && echo "$d"
  done
  python3 -c 'import nvidia.cublas as c, os; print(os.path.join(list(c.__path__)[0], "lib"))' 2>/dev/null
  find /usr /opt -name libcublasLt.so.13 2>/dev/null | xargs -r -n1 dirname | head -n 3
}

bundle() {
  local out=$1
  build "$build_dir"
  mkdir -p "$out"
  cp "$build_dir/libtessera_cuda.so" "$build_dir/tests/cuda/test_cuda_ops" "$build_dir/tests/cuda/test_cuda_models" \
     "$build_dir/bench/cuda/bench_cuda" "$build_dir/bench/cuda/bench_load" "$build_dir/bench/cuda/bench_engine" "$build_dir/tests/backend/test_backend_ops" \
     "$build_dir/tests/models/test_models" \
     "$build_dir/tessera" \
     "$repo/scripts/gpu_run.sh" "$out/"
  # The C++ runtime and the Debian libraries the programs were built against; the C library and
  # cuBLASLt are the machine's.
  ldd "$out/tessera" "$out/bench_load" | awk '$3 ~ /^\// {print $3}' | sort -u |
    grep -v -E '/(libc|libm|libdl|libpthread|librt|ld-linux[^/]*)\.so' | xargs -r -I{} cp -L {} "$out/"
  strip --strip-unneeded "$out"/*.so* "$out"/test_* "$out"/bench_cuda "$out"/bench_load "$out"/bench_engine "$out"/tessera
  du -sh "$out"
}

run() {
  local bin=$1
  mkdir -p "$log_dir"
  local libs
  libs=$(cublas_dirs | sort -u | paste -sd:)
  export LD_LIBRARY_PATH="$bin${libs:+:$libs}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  export TESSERA_CUDA_PLUGIN=$bin/libtessera_cuda.so TESSERA_FIXTURES_DIR=$repo/tests/fixtures
  {
    nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.mem --format=csv
    echo "cuBLASLt from: ${libs:-not found}"
    ldd "$bin/libtessera_cuda.so"
  } 2>&1 | tee "$log_dir/env.log"
  local status=0
  : >"$log_dir/checks.log"
  note() { echo "$1" | tee -a "$log_dir/checks.log"; }
  "$bin/test_cuda_ops" 2>&1 | tee "$log_dir/test_cuda_ops.log" || status=1
  "$bin/test_cuda_models" 2>&1 | tee "$log_dir/test_cuda_models.log" || status=1
  # The shared op harness (every backend against the CPU reference), the CUDA line included.
  "$bin/test_backend_ops" 2>&1 | tee "$log_dir/test_backend_ops.log" || status=1
  # MLX-quantized fixture checkpoints with their codes kept on the GPU, against their f32 values.
  "$bin/test_models" --gtest_filter='MlxQuantized.*' 2>&1 | tee "$log_dir/test_models_quantized.log" || status=1
  # The whole binary on the GPU: the bundled f32 model's greedy text equals the CPU backend's.
  local gen=(generate -m "$repo/models/tessera-kjv" -p "Genesis 1:1 In the beginning" -n 48 --temperature 0)
  "$bin/tessera" "${gen[@]}" --device cuda >"$log_dir/generate_cuda.txt" 2>"$log_dir/generate_cuda.err" || status=1
  "$bin/tessera" "${gen[@]}" --device cpu >"$log_dir/generate_cpu.txt" 2>/dev/null || status=1
  if [ -s "$log_dir/generate_cuda.txt" ] && cmp -s "$log_dir/generate_cuda.txt" "$log_dir/generate_cpu.txt"; then
    note "GENERATE cuda == cpu"
  else note "GENERATE cuda != cpu"; status=1; fi
  cat "$log_dir/generate_cuda.txt" "$log_dir/generate_cuda.err"
  # Scoring (logprobs computed where the logits are): the held-out perplexity as on the CPU, to
  # the 1e-3 the CPU is held to against transformers.
  local ppl=(perplexity -m "$repo/models/tessera-kjv" -f "$repo/tests/fixtures/tessera-kjv/heldout.txt" --context 512 --stride 256)
  local ppl_cuda ppl_cpu
  ppl_cuda=$("$bin/tessera" "${ppl[@]}" --device cuda 2>"$log_dir/perplexity_cuda.err")
  ppl_cpu=$("$bin/tessera" "${ppl[@]}" --device cpu 2>/dev/null)
  if awk -v a="${ppl_cuda#*: }" -v b="${ppl_cpu#*: }" 'BEGIN { d = a - b; exit !(a > 0 && d < 1e-3 && d > -1e-3) }'; then
    note "PERPLEXITY cuda ${ppl_cuda#*: } == cpu ${ppl_cpu#*: } (within 1e-3)"
  else note "PERPLEXITY cuda '${ppl_cuda}' != cpu '${ppl_cpu}'"; status=1; fi
  if command -v compute-sanitizer >/dev/null; then
    timeout 120 compute-sanitizer --tool memcheck --error-exitcode 3 "$bin/test_cuda_ops" --gtest_filter='CudaOps.*' \
      >"$log_dir/memcheck.log" 2>&1 || status=1
    timeout 120 compute-sanitizer --tool racecheck --error-exitcode 3 "$bin/test_cuda_ops" \
      --gtest_filter='CudaOps.Attention' >"$log_dir/racecheck.log" 2>&1 || status=1
    # Decode steps replaying CUDA graphs, under memcheck (the f32 fixture model).
    timeout 180 compute-sanitizer --tool memcheck --error-exitcode 3 "$bin/test_cuda_models" \
      --gtest_filter='*MatchCpuBackend/llama' >"$log_dir/memcheck_graphs.log" 2>&1 || status=1
    # Logprobs and sampling kernels, and the products (quantized ones included, every qmma form;
    # those split over k ranges into the residual add): the harness's cases of those ops.
    timeout 180 compute-sanitizer --tool memcheck --error-exitcode 3 "$bin/test_backend_ops" \
      --gtest_filter='*cuda_logprobs*:*cuda_sample_rows*:*cuda_linear:*cuda*linear_add_rms_norm*' \
      >"$log_dir/memcheck_logits.log" 2>&1 || status=1
    tail -n 2 "$log_dir/memcheck.log" "$log_dir/memcheck_graphs.log" "$log_dir/memcheck_logits.log" \
      "$log_dir/racecheck.log"
  fi
  "$bin/bench_cuda" 2>&1 | tee "$log_dir/bench_cuda.log" || status=1
  "$bin/bench_cuda" --context 4096 --steps 5 >"$log_dir/bench_cuda_ctx4096.log" 2>&1 || status=1
  # tessera serve start-up with an 8B-shaped checkpoint it writes (16 GB, kept in $TMPDIR).
  "$bin/bench_load" --tessera "$bin/tessera" 2>&1 | tee "$log_dir/bench_load.log" || status=1
  # The checkpoint directory a bench_load log ($1) names, else its default ($2).
  checkpoint_in() {
    local d
    d=$(sed -n 's/^checkpoint: \([^ ,]*\).*/\1/p' "$1" | head -n 1)
    echo "${d:-$2}"
  }
  # Batched generation through the whole engine on that checkpoint.
  "$bin/bench_engine" --model "$(checkpoint_in "$log_dir/bench_load.log" /tmp/tessera-bench-load-8b)" 2>&1 |
    tee "$log_dir/bench_engine.log" || status=1
  # A qk-norm model's decode (Qwen3-4B shape, 8 GB written once): two norms a layer between products.
  "$bin/bench_load" --shape qwen3-4b --write-only 2>&1 | tee "$log_dir/bench_load_qwen3.log" || status=1
  "$bin/bench_engine" --model "$(checkpoint_in "$log_dir/bench_load_qwen3.log" /tmp/tessera-bench-load-qwen3-4b)" \
    --batches 1,8,32 --gen 64 >"$log_dir/bench_engine_qwen3.log" 2>&1 || status=1
  # MLX-quantized (4-bit, groups of 64) 8B shape, its codes kept on the GPU (4.5 GB);
  # then with every product widened (TESSERA_CUDA_CODE_PRODUCTS=0: no qmma, no qgemv), as prompts are.
  local q4
  "$bin/bench_load" --bits 4 --write-only 2>&1 | tee "$log_dir/bench_load_q4.log" || status=1
  q4=$(checkpoint_in "$log_dir/bench_load_q4.log" /tmp/tessera-bench-load-8b-q4)
  "$bin/bench_engine" --model "$q4" --batches 1,8,32 --gen 64 >"$log_dir/bench_engine_q4.log" 2>&1 || status=1
  TESSERA_CUDA_CODE_PRODUCTS=0 "$bin/bench_engine" --model "$q4" --batches 1,8 --gen 32 \
    >"$log_dir/bench_engine_q4_widened.log" 2>&1 || status=1
  # 8-bit codes (8.5 GB) and 4-bit codes with f16 scales (as an f16 model converts; 4.5 GB), on
  # the tensor cores as 4-bit codes with bf16 scales are.
  local q8
  "$bin/bench_load" --bits 8 --write-only 2>&1 | tee "$log_dir/bench_load_q8.log" || status=1
  q8=$(checkpoint_in "$log_dir/bench_load_q8.log" /tmp/tessera-bench-load-8b-q8)
  "$bin/bench_engine" --model "$q8" --batches 1,8,32 --gen 64 >"$log_dir/bench_engine_q8.log" 2>&1 || status=1
  local q4h
  "$bin/bench_load" --bits 4 --scales f16 --write-only 2>&1 | tee "$log_dir/bench_load_q4_f16.log" || status=1
  q4h=$(checkpoint_in "$log_dir/bench_load_q4_f16.log" /tmp/tessera-bench-load-8b-q4-f16)
  "$bin/bench_engine" --model "$q4h" --batches 1,8,32 --gen 64 >"$log_dir/bench_engine_q4_f16.log" 2>&1 || status=1
  rm -rf "$q4" "$q8" "$q4h"  # quick to write again; the disk then holds the MoE checkpoint beside the others
  # A mixture of experts (Qwen3-30B-A3B shape, 12 of its 48 layers, 16 GB written once): routing
  # and experts on the GPU, then for comparison the GEMV form alone (TESSERA_CUDA_MOE_TILES=0: no
  # tensor-core tiles, prompts past 512 tokens grouped on the host) and the host grouping for all
  # (TESSERA_CUDA_MOE=0).
  local moe
  "$bin/bench_load" --shape qwen3-30b-a3b --write-only 2>&1 | tee "$log_dir/bench_load_moe.log" || status=1
  moe=$(checkpoint_in "$log_dir/bench_load_moe.log" /tmp/tessera-bench-load-qwen3-30b-a3b-12l)
  "$bin/bench_engine" --model "$moe" --batches 1,8,32,64,128 --gen 64 >"$log_dir/bench_engine_moe.log" 2>&1 || status=1
  TESSERA_CUDA_MOE_TILES=0 "$bin/bench_engine" --model "$moe" --batches 32,128 --gen 64 \
    >"$log_dir/bench_engine_moe_rows.log" 2>&1 || status=1
  TESSERA_CUDA_MOE=0 "$bin/bench_engine" --model "$moe" --batches 1,32 --gen 16 \
    >"$log_dir/bench_engine_moe_host.log" 2>&1 || status=1
  echo "== summary"
  grep -h -E '^NMSE|^MODEL' "$log_dir/test_cuda_ops.log" "$log_dir/test_cuda_models.log"
  grep -h -E 'PASSED|FAILED' "$log_dir"/test_*.log
  cat "$log_dir/checks.log"
  [ -f "$log_dir/memcheck.log" ] && grep -H -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$log_dir"/*check*.log
  sed -n '/^measurement/,$p' "$log_dir/bench_cuda.log"
  sed -n '/^measurement/,$p' "$log_dir/bench_cuda_ctx4096.log" | grep decode
  sed -n '/^measurement/,$p' "$log_dir/bench_load.log"
  sed -n '/^batch/,$p' "$log_dir/bench_engine.log"
  echo "Qwen3-4B shape (bench_engine --batches 1,8,32 --gen 64):"
  awk '/^batch +sampling +prefill/ { f = 1 } f && /^$/ { exit } f' "$log_dir/bench_engine_qwen3.log"
  echo "8B shape, 4-bit MLX codes (bench_engine --batches 1,8,32 --gen 64; then every product widened):"
  awk '/^batch +sampling +prefill/ { f = 1 } f && /^$/ { exit } f' "$log_dir/bench_engine_q4.log" | head -n 5
  awk '/^batch +sampling +prefill/ { f = 1 } f && /^$/ { exit } f' "$log_dir/bench_engine_q4_widened.log" | head -n 4
  echo "8B shape, 8-bit MLX codes; then 4-bit with f16 scales (bench_engine --batches 1,8,32 --gen 64):"
  awk '/^batch +sampling +prefill/ { f = 1 } f && /^$/ { exit } f' "$log_dir/bench_engine_q8.log" | head -n 4
  awk '/^batch +sampling +prefill/ { f = 1 } f && /^$/ { exit } f' "$log_dir/bench_engine_q4_f16.log" | head -n 4
  echo "Qwen3-30B-A3B shape, 12 layers (bench_engine --batches 1,8,32,64,128 --gen 64; then the GEMV form alone; then grouped on the host):"
  awk '/^batch +sampling +prefill/ { f = 1 } f && /^$/ { exit } f' "$log_dir/bench_engine_moe.log" | head -n 6
  grep -h '^scoring' "$log_dir/bench_engine_moe.log"
  awk '/^batch +sampling +prefill/ { f = 1 } f && /^$/ { exit } f' "$log_dir/bench_engine_moe_rows.log" | head -n 3
  grep -h '^scoring' "$log_dir/bench_engine_moe_rows.log"
  awk '/^batch +sampling +prefill/ { f = 1 } f && /^$/ { exit } f' "$log_dir/bench_engine_moe_host.log" | head -n 3
  return $status
}

case "${1:-}" in
  --bundle) bundle "$2" ;;
  --from) run "$(cd "$2" && pwd)" ;;
  "") bundle "$build_dir/gpu-bundle" && run "$build_dir/gpu-bundle" ;;
  *) echo "usage: $0 [--bundle DIR | --from DIR]" >&2; exit 2 ;;
esac
