#include <atomic>
#include <cstdlib>
#include <cstring>

#include "backend/cpu/fast_ops.h"

namespace tessera::cpu::fast {
namespace {

Isa initial_isa() {
  const char* env = std::getenv("TESSERA_CPU_ISA");
  if (env && std::strcmp(env, "avx2") == 0) return Isa::Avx2;
  return best_isa();
}

std::atomic<Isa>& current() {
  static std::atomic<Isa> isa{initial_isa()};
  return isa;
}

}  // namespace

Isa best_isa() {
  static const Isa best = __builtin_cpu_supports("avx512f") ? Isa::Avx512 : Isa::Avx2;
  return best;
}

Isa isa() { return current().load(std::memory_order_relaxed); }

void set_isa(Isa want) { current().store(want == Isa::Avx512 ? best_isa() : Isa::Avx2, std::memory_order_relaxed); }

const char* isa_name(Isa isa) { return isa == Isa::Avx512 ? "avx512" : "avx2"; }

}  // namespace tessera::cpu::fast
