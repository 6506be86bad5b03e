// The subcommands of `lina` other than train: eval, sample, state-size.
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

// The memory table of spec §1.3 for every preset at `context` tokens.
std::string state_size_table(int64_t context);

}  // namespace lina
