// Op-level CPU numbers next to the machine's measured memory read bandwidth:
// GEMV (decode, weight-streaming) GB/s for Llama-3.2-1B-shaped bf16 weights (or, with --bits,
// MLX-quantized ones: codes in groups of 64 with bf16 scales and biases), and GEMM (prefill) GFLOP/s.
#include <cblas.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "backend/cpu/fast_ops.h"
#include "core/dtype.h"
#include "core/quantization.h"
#include "core/threadpool.h"
#include "membw.h"

namespace tessera::bench {
namespace {

struct G {
  const char* name;
  int64_t N, K;
};

// Bytes a product reads of its weight: a quantized one's codes, scales and biases.
size_t weight_bytes(const Tensor& w) {
  const Quantization* q = w.quantization();
  return w.nbytes() + (q ? q->scales.nbytes() + q->biases.nbytes() : 0);
}

// Several copies of a weight (bits 0: bf16, else MLX-quantized), together larger than the
// last-level cache, used in turn so each call streams its weight from memory as decode does.
std::vector<Tensor> cold_weights(int bits, int64_t N, int64_t K, size_t min_total_bytes) {
  size_t bytes = bits ? size_t(N * K) * size_t(bits) / 8 * 9 / 8 : size_t(N * K) * 2;
  size_t copies = std::max<size_t>(1, (min_total_bytes + bytes - 1) / bytes);
  std::vector<Tensor> ws;
  uint32_t state = 12345;
  auto next = [&] { return state = state * 1664525u + 1013904223u; };
  // Small random values (|x| < 2^-4), exact in bf16.
  auto small_bf16 = [&] { return uint16_t(0x3c00 | ((next() >> 16) & 0x7f) | ((state >> 8) & 0x8000)); };
  for (size_t c = 0; c < copies; ++c) {
    if (!bits) {
      Tensor w = Tensor::empty(DType::BF16, {N, K});
      for (int64_t i = 0; i < N * K; ++i) w.data<uint16_t>()[i] = small_bf16();
      ws.push_back(w);
      continue;
    }
    Tensor codes = Tensor::empty(DType::U32, {N * K * bits / 32});
    Tensor scales = Tensor::empty(DType::BF16, {N, K / 64}), biases = Tensor::empty(DType::BF16, {N, K / 64});
    for (int64_t i = 0; i < codes.numel(); ++i) codes.data<uint32_t>()[i] = next();
    for (int64_t i = 0; i < scales.numel(); ++i)
      scales.data<uint16_t>()[i] = small_bf16(), biases.data<uint16_t>()[i] = small_bf16();
    ws.push_back(Tensor::quantized(codes, {N, K}, {bits, 64, scales, biases}));
  }
  return ws;
}

// Best of 5 rounds of `calls` calls: the machine may be shared, and the best round is the one
// least disturbed by other work.
double seconds_per_call(const std::function<void(int)>& fn, int calls) {
  fn(0);  // warm up
  double best = 1e30;
  for (int round = 0; round < 5; ++round) {
    auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < calls; ++i) fn(round * calls + i);
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / calls);
  }
  return best;
}

// The read bandwidth is measured again before each row and the best seen so far is the ceiling
// (on a shared machine it varies from second to second).
std::string weight_name(int bits) {
  return bits ? std::to_string(bits) + "-bit weight" : "bf16 weight";
}

void bench_gemv(Backend& be, ThreadPool& pool, double bw, size_t cold_bytes, int bits) {
  std::printf("%-28s %4s %10s %9s %8s %9s\n", ("GEMV (" + weight_name(bits) + ")").c_str(), "T", "ms/call",
              "GB/s", "% of bw", "GFLOP/s");
  for (G g : {G{"gate/up  N=8192 K=2048", 8192, 2048}, G{"down     N=2048 K=8192", 2048, 8192},
              G{"lm_head  N=128256 K=2048", 128256, 2048}}) {
    auto ws = cold_weights(bits, g.N, g.K, cold_bytes);
    for (int T : {1, 8}) {
      Tensor x = Tensor::empty(DType::F32, {T, g.K}), out = Tensor::empty(DType::F32, {T, g.N});
      for (int64_t i = 0; i < x.numel(); ++i) x.data<float>()[i] = float(i % 7) * 0.1f;
      bw = std::max(bw, read_bandwidth_gbs(pool, size_t(512) << 20, 3));
      int calls = std::max<int>(2, int(1e9 / double(weight_bytes(ws[0]))));
      double s = seconds_per_call([&](int i) { be.linear(x, ws[size_t(i) % ws.size()], Tensor(), out); }, calls);
      double gbs = double(weight_bytes(ws[0])) / s / 1e9;
      std::printf("%-28s %4d %10.3f %9.1f %7.0f%% %9.1f\n", g.name, T, s * 1e3, gbs, 100 * gbs / bw,
                  2.0 * T * g.N * g.K / s / 1e9);
    }
  }
  std::printf("(best read bandwidth seen: %.1f GB/s)\n", bw);
}

void bench_gemm(Backend& be, int threads, int bits) {
  openblas_set_num_threads(threads);
  std::printf("\n%-28s %4s %10s %9s   %s\n", ("GEMM (" + weight_name(bits) + ")").c_str(), "T", "ms/call",
              "GFLOP/s",
              ("OpenBLAS sgemm, f32 weight (" + std::string(openblas_get_corename()) + " kernels)").c_str());
  for (G g : {G{"q/o      N=2048 K=2048", 2048, 2048}, G{"gate/up  N=8192 K=2048", 8192, 2048},
              G{"down     N=2048 K=8192", 2048, 8192}}) {
    auto ws = cold_weights(bits, g.N, g.K, 0);
    int T = 128;
    Tensor x = Tensor::empty(DType::F32, {T, g.K}), out = Tensor::empty(DType::F32, {T, g.N});
    for (int64_t i = 0; i < x.numel(); ++i) x.data<float>()[i] = float(i % 7) * 0.1f;
    double s = seconds_per_call([&](int) { be.linear(x, ws[0], Tensor(), out); }, 3);
    // The peer: OpenBLAS on an f32 copy of the same weight.
    Tensor wf = Tensor::empty(DType::F32, {g.N, g.K});
    if (bits)
      dequantize(ws[0], 0, wf.numel(), wf.data<float>());
    else
      for (int64_t i = 0; i < wf.numel(); ++i) wf.data<float>()[i] = bf16_to_f32(ws[0].data<uint16_t>()[i]);
    double sb = seconds_per_call(
        [&](int) {
          cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, T, int(g.N), int(g.K), 1.0f, x.data<float>(), int(g.K),
                      wf.data<float>(), int(g.K), 0.0f, out.data<float>(), int(g.N));
        },
        3);
    std::printf("%-28s %4d %10.2f %9.1f   %.1f GFLOP/s\n", g.name, T, s * 1e3, 2.0 * T * g.N * g.K / s / 1e9,
                2.0 * T * g.N * g.K / sb / 1e9);
  }
}

}  // namespace
}  // namespace tessera::bench

int main(int argc, char** argv) {
  using namespace tessera;
  using namespace tessera::bench;
  CLI::App app{"CPU op benchmark"};
  int threads = 0, bits = 0;
  double cold_gib = 1.0;
  app.add_option("--threads", threads, "threads (0: all cores)");
  std::string only;
  app.add_option("--only", only, "run only this part: gemv or gemm");
  app.add_option("--bits", bits, "0: bf16 weights; 2-6 or 8: MLX-quantized, groups of 64")
      ->check(CLI::IsMember({0, 2, 3, 4, 5, 6, 8}));
  app.add_option("--cold-gib", cold_gib, "GiB of weight copies cycled through so GEMV reads from memory");
  CLI11_PARSE(app, argc, argv);
  if (threads > 0) ThreadPool::set_global_threads(threads);
  ThreadPool& pool = ThreadPool::global();
  auto be = make_cpu_backend();

  ThreadPool one(1);
  double bw1 = read_bandwidth_gbs(one), bw = read_bandwidth_gbs(pool);
  std::printf("memory read bandwidth: %.1f GB/s with 1 thread, %.1f GB/s with %d threads; kernels: %s\n\n", bw1, bw,
              pool.size(), cpu::fast::isa_name(cpu::fast::isa()));

  if (only != "gemm") bench_gemv(*be, pool, bw, size_t(cold_gib * (1 << 30)), bits);
  if (only != "gemv") bench_gemm(*be, pool.size(), bits);
  return 0;
}
