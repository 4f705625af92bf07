// Turns one scheduled step into a flat ForwardBatch (token ids, positions, slot mapping,
// block tables, logits rows), runs the model on the backend, and returns the logits of the
// sequences that finish their pending tokens this step.
#pragma once
#include <span>
#include <vector>

#include "engine/scheduler.h"
#include "models/model.h"

namespace tessera {

struct StepLogits {
  std::vector<int> seq_index;  // index into the scheduled batch of each logits row
  std::vector<int> position;   // position in its sequence of the token each row follows
  std::span<const float> logits;  // [rows, vocab] row-major, host memory valid until the next run
  std::vector<int32_t> ids;       // [rows] the chosen tokens instead of the logits, when run() was given draws
  int vocab = 0;
};

// Where a run's wall time went, in seconds (host clock).
struct RunTimes {
  double prepare = 0;   // building the step's inputs on the host and uploading them
  double enqueue = 0;   // the forward's ops handed to the backend (a GPU's launches)
  double readback = 0;  // from the last launch until the logits or ids are on the host
};

class ModelRunner {
 public:
  ModelRunner(Model& model, Backend& be, KvCache& cache) : model_(model), be_(be), cache_(cache) {}
  // all_rows: logits after every new token (scoring a text), not only where sampling happens.
  // draws: one per logits row; the backend chooses the tokens where the logits are (argmax_rows
  // when every row is greedy, else sample_rows) and only the ids come back (on a GPU, 4 bytes a
  // row instead of the vocabulary's logits).
  StepLogits run(const std::vector<ScheduledSeq>& batch, bool all_rows = false,
                 const std::vector<RowSampling>* draws = nullptr);
  // Sums over every run so far.
  const RunTimes& times() const { return times_; }

 private:
  Tensor upload_i32(const std::vector<int32_t>& v, Shape shape);

  Model& model_;
  Backend& be_;
  KvCache& cache_;
  Tensor logits_host_;  // reused across steps: page-locked on a GPU, grown as needed
  RunTimes times_;
};

}  // namespace tessera
