// Turns one scheduled step into a flat ForwardBatch (token ids, positions, slot mapping,
// block tables, logits rows), runs the model on the backend, and returns the logits of the
// sequences that finish their pending tokens this step.
//
// Decode steps (every sequence computes its one newest token) replay a recording of the model's
// forward where the backend can record (a GPU's CUDA graphs): one launch instead of hundreds.
// A recording is made per shape: the batch padded with empty sequences to a power of two, and
// the longest context rounded up to a power of two (the attention's key splits and the block
// tables' width depend on it). The inputs of a shape live at fixed addresses that each step
// overwrites; the first step of a shape runs unrecorded (the backend sets up its products'
// algorithms then), the second records.
#pragma once
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <utility>
#include <vector>

#include "engine/scheduler.h"
#include "models/model.h"

namespace tessera {

struct StepLogits {
  std::vector<int> seq_index;  // index into the scheduled batch of each logits row
  std::vector<int> position;   // position in its sequence of the token each row follows
  // [rows, vocab] row-major, host memory valid until the next draw; with draws, only the rows of
  // Draws::host_rows, in that order.
  std::span<const float> logits;
  std::vector<int32_t> ids;  // with draws: [rows] the backend's chosen tokens (-1 in the host's rows)
  // With draws that ask for them (Draws::logprobs): per row, the chosen token's logprob and the
  // top-n list, as Backend::logprobs() gives them; unset in the other rows.
  std::vector<float> token_logprob;
  std::vector<std::vector<std::pair<int32_t, float>>> top_logprobs;
  int vocab = 0;
  // Prompt scores (Sequence::prompt_logprobs), apart from the rows above: per scored position of
  // a sequence still in its prompt, the next prompt token's logprob and the top-n list, computed
  // where the logits are.
  std::vector<int> score_seq_index, score_position;
  std::vector<int32_t> score_token;  // the prompt token scored: the one after score_position
  std::vector<float> score_logprob;
  std::vector<std::vector<std::pair<int32_t, float>>> score_top;
};

// How each logits row of a step is drawn (ModelRunner::run): by the backend, rows[i] for row i
// after the edits of penalties and logit bias (Backend::edit_logits); or, for the rows listed in
// host_rows (ascending; their draws and edits are unused), on the host from their logits.
// logprobs (empty, or one per row): -1, or for a backend's row, the number of most likely tokens
// to list with its token's logprob (Backend::logprobs, of the model's logits before any edits).
struct Draws {
  std::vector<RowSampling> rows;
  std::vector<LogitEdit> edits;
  std::vector<int32_t> host_rows;
  std::vector<int> logprobs;
};

// Where a run's wall time went, in seconds (host clock).
struct RunTimes {
  double prepare = 0;   // building the step's inputs on the host and uploading them
  double enqueue = 0;   // the forward's ops handed to the backend (a GPU's launches)
  double readback = 0;  // from the last launch until the logits or ids are on the host
  int64_t replayed = 0; // steps that replayed a recording
  int64_t ahead = 0;    // steps launched before the results of the one before them were back
};

class ModelRunner {
 public:
  // replay: decode steps replay recordings where the backend and the model allow it.
  ModelRunner(Model& model, Backend& be, KvCache& cache, bool replay = true);
  ~ModelRunner();
  // all_rows: logits after every new token (scoring a text), not only where sampling happens.
  // draws: one per logits row; the backend edits the logits and chooses the tokens where they
  // are (argmax_rows when every row is greedy, else sample_rows) and only the ids come back (on a
  // GPU, 4 bytes a row instead of the vocabulary's logits), besides the logits of the host's rows.
  StepLogits run(const std::vector<ScheduledSeq>& batch, bool all_rows = false, const Draws* draws = nullptr);
  // run() in halves, so that the host can prepare a step's draws while the backend computes its
  // forward, and read a step's results while the backend computes the next: launch() enqueues
  // the forward, draw() its draws and their copies to the host, collect() waits for those.
  // finish() is draw() then collect(). One step launched and one drawn at a time.
  void launch(const std::vector<ScheduledSeq>& batch, bool all_rows = false);
  StepLogits finish(const Draws* draws = nullptr);
  void draw(const Draws* draws = nullptr);
  StepLogits collect();
  // Launches the decode step after the drawn one before its results are back: each sequence of
  // `batch` (the drawn step's, each computing its newest token) computes the token that step
  // drew for it, which goes from the draw's ids to this step's inputs on the backend. The drawn
  // step must have drawn every row on the backend; the caller has made room in the KV cache for
  // one more token of each sequence.
  void launch_next(const std::vector<ScheduledSeq>& batch);
  // Scoring a text: the log-probability of each sequence's next token after every new token of
  // the step (the sequences' tokens reach past them), computed where the logits are.
  std::vector<float> score(const std::vector<ScheduledSeq>& batch);
  // Sums over every run so far.
  const RunTimes& times() const { return times_; }

  // Largest batch a recording is made for (the products' tuned size classes end there).
  static constexpr int kMaxReplayedSeqs = 512;

 private:
  // A step's inputs on the host, in ForwardBatch's layout.
  struct Inputs {
    std::vector<int32_t> ids, positions, slots, starts{0}, context_lens, rows, tables;
    std::vector<int> score_top;  // per prompt score, the top-n its sequence asks for
    int table_width = 1, max_query = 0, max_context = 0;
  };
  struct Replay;

  // Flattens the batch; block tables `table_width` wide (0: the widest table's). ahead = 1: each
  // sequence's tokens start one past its computed ones, at the token not yet on the host (its id
  // left 0 here, for launch_next to fill in).
  Inputs flatten(const std::vector<ScheduledSeq>& batch, bool all_rows, int table_width, int ahead,
                 StepLogits& out) const;
  bool replayable(const std::vector<ScheduledSeq>& batch, bool all_rows) const;
  // Enqueues the forward of the batch; a defined `ids` replaces its first token ids on the backend.
  void start(const std::vector<ScheduledSeq>& batch, bool all_rows, int ahead, const Tensor& ids);
  Tensor forward(const Inputs& in, const Tensor& ids);
  // The decode step's logits for its batch padded to `seqs` rows.
  Tensor forward_replayed(Inputs in, int seqs, int context, const Tensor& ids);
  Tensor upload_i32(const std::vector<int32_t>& v, Shape shape);
  // Where ids is defined (launch_next): the step's first token ids become the drawn ids, on the
  // backend, after its inputs' upload.
  void take_drawn_ids(const Tensor& ids, const Tensor& token_ids);
  // A page-locked host buffer of at least n elements, grown as needed.
  void* host_buffer(Tensor& buf, DType dtype, int64_t n);

  Model& model_;
  Backend& be_;
  KvCache& cache_;
  const bool replay_;
  std::map<std::pair<int, int>, Replay> replays_;  // by (padded batch, context bucket)
  // Where a drawn step's results come back, reused across steps (page-locked on a GPU).
  Tensor logits_host_, ids_host_, lp_host_, best_host_, score_lp_host_, score_best_host_;
  int64_t replayed_uploads_ = 0;  // picks each replayed step's host input buffer (Replay::host)
  // Between launch() and draw(): the forward's logits and the rows' bookkeeping.
  struct Launched {
    Tensor logits;
    StepLogits out;
    std::vector<int> score_top;  // Inputs::score_top
  };
  std::optional<Launched> launched_;
  // Between draw() and collect(): what comes back, and the chosen ids on the backend.
  struct Drawn {
    StepLogits out;
    Tensor ids;                   // [rows] i32, when the backend drew
    std::vector<int32_t> lp_rows;  // the backend's rows that report logprobs
    std::vector<int> lp_counts;    // how many of the top `top` each of them lists
    int top = 0;
    int64_t host_logits = 0;      // elements of logits coming back
    std::vector<int> score_counts;  // per prompt score, how many of the top `score_top` it lists
    int score_top = 0;
  };
  std::optional<Drawn> drawn_;
  // Enqueues the prompt scores of a launched step: logits rows from `first` on, one per entry of
  // `top` (the top-n each asks for); collect() reads them.
  void draw_scores(const Tensor& logits, int64_t first, const std::vector<int>& top, Drawn& d);
  RunTimes times_;
};

}  // namespace tessera
