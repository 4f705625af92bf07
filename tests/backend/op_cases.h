// Test cases for the backend op harness: each case builds random host inputs once, and runs one op
// on any backend (uploading inputs, poisoning outputs with NaN, downloading the results), so the
// same case can be scored on the backend under test against the reference backend.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "backend/backend.h"

namespace tessera::test {

struct OpCase {
  std::string name;  // op, dtype and shape, printed on failure
  std::string op;
  DType dtype;       // dtype of the case's weight or KV cache (F32 where the op takes neither; U32:
                     // a quantized weight, core/quantization.h)
  double max_nmse;   // per-op limit for a backend that accumulates in f32 (see op_cases.cpp)
  // Runs the op on `be`; returns every output tensor flattened to f32 on the host.
  std::function<std::vector<std::vector<float>>(Backend& be)> run;
  DType values = DType::F32;  // a quantized weight's (U32) values: its scales' dtype
};

// The cases of one op of backend.h, by the op's name ("linear", "attention", ...).
std::vector<OpCase> op_cases(const std::string& op);
// Every op of backend.h that has cases.
const std::vector<std::string>& op_names();

}  // namespace tessera::test
