// The subcommands of `lina` other than train: eval, sample, state-size, presets.
#pragma once
#include <cstdint>
#include <string>

namespace lina {

// Mean cross-entropy over the non-overlapping windows of context+1
// characters from the start of `text_path` (inputs: the first `context` of
// each window, targets: shifted by one; a trailing partial window is dropped).
double eval_checkpoint(const std::string& checkpoint, const std::string& text_path, int context);

// Generates `tokens` characters after `prompt` with the recurrent,
// constant-state form (one token at a time, carried state). temperature 0
// is greedy decoding.
std::string sample_checkpoint(const std::string& checkpoint, const std::string& prompt, int tokens,
                              double temperature, uint64_t seed);

// A recall checkpoint on its run's own held-out set (RecallTask::heldout
// with the run's pairs, keys and batch, seed = run seed + 1, as in training):
// `batches` batches (≤ 0: the run's eval_batches). Writes `predictions`
// (json): the mean loss and accuracy where values of the second half are
// scored, and for the first `show` sequences the tokens, the scored
// positions, the targets and the model's argmax answers.
struct RecallEvalResult {
  double loss = 0, accuracy = 0;
  int sequences = 0;
};
RecallEvalResult eval_recall_checkpoint(const std::string& checkpoint, const std::string& predictions,
                                        int batches, int show = 4);

// The memory table of docs/spec.md §1.3 for every preset at `context` tokens.
std::string state_size_table(int64_t context);  // lina's presets, then real_scale_table()
// The survey's and the course's layouts at contexts 4,096 / 32,768 / 131,072 (docs/spec.md §1.3).
std::string real_scale_table();

// Every preset of the registry, one line each, in all_preset_names() order:
// its name, "course" or "survey", and its layers' mixers, comma-separated
// ("hybrid course gdn,gdn,gdn,attn"). scripts/presets.py holds the same
// list for the scripts (tests/test_presets.py compares the two).
std::string preset_table();

}  // namespace lina
