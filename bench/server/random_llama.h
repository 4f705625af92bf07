// A Llama-shaped checkpoint with random f32 weights (~20M parameters, 6 layers of width 512),
// written by the bench itself: a model ~9x the bundled one's size, so that the server's
// per-token cost is weighed against a longer engine step. Its tokens are meaningless.
#pragma once
#include <filesystem>

namespace tessera::bench {

// Writes config.json and model.safetensors into `dir` (created).
void write_random_llama(const std::filesystem::path& dir);

}  // namespace tessera::bench
