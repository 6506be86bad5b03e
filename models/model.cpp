#include "models/model.h"

#include <cmath>
#include <utility>

#include "models/block.h"
#include "models/initialiser.h"

namespace lina {

long long InferenceState::kv_floats() const {
  long long n = 0;
  for (const LayerCache& l : layers)
    if (l.k.defined()) n += l.k.numel() + l.v.numel();
  return n;
}
long long InferenceState::state_floats() const {
  long long n = 0;
  for (const LayerCache& l : layers)
    if (l.state.defined()) n += l.state.numel();
  return n;
}
long long InferenceState::conv_floats() const {
  long long n = 0;
  for (const LayerCache& l : layers)
    if (l.conv.defined()) n += l.conv.numel();
  return n;
}

// ---- construction & initialisation (docs/spec.md §1, "init") ------------------------------

// Registration follows the course's module order (tok, then each block's
// mixer, ffn, n1, n2, then norm_f and lm_head), so a state_dict lists the
// same names in the same order.
LanguageModel::LanguageModel(const ModelConfig& c, uint64_t seed, DType dtype, Device device)
    : config_(c) {
  check(c.n_layer() > 0, "model: a model needs at least one layer");
  check(c.n_head * c.head_size == c.n_embd && c.n_head % c.n_kv_head == 0,
        "model: n_head · head_size must equal n_embd and n_kv_head must divide n_head");
  Initialiser init{params_, Rng(seed)};
  const int64_t C = c.n_embd, F = c.mlp_hidden;
  tok_ = init.normal("tok.weight", {c.vocab, C}, 1.0);
  for (int i = 0; i < c.n_layer(); ++i) {
    const std::string p = "blocks." + std::to_string(i) + ".";
    const MixerRow& row = *c.layers[size_t(i)];
    Block b(i, row, row.make(row, init, c, i));  // the mixer registers its parameters first
    b.mlp.gate = init.linear(p + "ffn.gate.weight", F, C);
    b.mlp.up = init.linear(p + "ffn.up.weight", F, C);
    b.mlp.down = init.linear(p + "ffn.down.weight", C, F);
    b.n1 = init.constant(p + "n1.weight", {C}, 1.0);
    b.n2 = init.constant(p + "n2.weight", {C}, 1.0);
    blocks_.push_back(std::move(b));
  }
  norm_f_ = init.constant("norm_f.weight", {C}, 1.0);
  lm_head_ = init.linear("lm_head.weight", c.vocab, C);
  lm_head_bias_ = init.bias("lm_head.bias", c.vocab, C);
  params_.finalize(dtype, device);
}

LanguageModel::~LanguageModel() = default;

InferenceState LanguageModel::new_state(int64_t batch) const {
  InferenceState s;
  for (const Block& b : blocks_)
    s.layers.push_back(b.mixer->new_cache(config_, batch, params_.dtype(), params_.device()));
  return s;
}

// ---- forward --------------------------------------------------------------------------------

// x + dropout(branch), then its norm with `weight`, as one op
// (residual_rms_norm): x becomes the sum, the residual stream's next value
// (undefined after the last block, where only norm_f reads it); returns the
// norm, the next sublayer's input.
static Var add_and_norm(Var& x, const Var& branch, const DropoutKey& key, const Var& weight, double eps,
                        const char* sum_name, const char* norm_name, bool last = false) {
  ResidualNormed out = residual_rms_norm(x, branch, key, weight, eps, /*keep_sum=*/!last);
  x = named(std::move(out.sum), sum_name);
  return named(std::move(out.normed), norm_name);
}

Var LanguageModel::forward(const Tensor& ids, InferenceState* state, AlphaStats* alpha) {
  check(ids.dtype() == DType::I32 && ids.ndim() == 2,
        "model: expected token ids int32 [B, T], got " + ids.describe());
  check(!state || state->layers.size() == blocks_.size(),
        "model: inference state has the wrong number of layers");
  const ModelConfig& c = config_;
  int64_t pos0 = state ? state->position : 0;
  Var x = named(embedding(tok_, ids), "tok");  // [B, T, C], the residual stream
  // Every norm but the first follows a residual sum, and runs with it as one
  // op (add_and_norm): a block ends with the next block's n1 (or norm_f).
  Var normed = named(rms_norm(x, blocks_.front().n1, c.norm_eps), blocks_.front().names.n1);
  if (alpha) *alpha = AlphaStats{};
  for (size_t i = 0; i < blocks_.size(); ++i) {
    const Block& b = blocks_[i];
    const BlockNames& n = b.names;
    MixerCall call;
    call.pos0 = pos0;
    call.cache = state ? &state->layers[i] : nullptr;
    call.dropout = dropout_;
    std::vector<double> decay_mean;
    const bool record = alpha && b.mixer_row->learns_decay();
    call.decay_mean = record ? &decay_mean : nullptr;
    Var h = b.mixer->forward(c, normed, call);
    if (record) {
      alpha->layer.push_back(int(i));
      alpha->mean.push_back(decay_mean);
    }
    normed = add_and_norm(x, h, dropout_.key(b.layer, DropoutSite::MixerOutput), b.n2, c.norm_eps, n.residual,
                          n.n2);
    Var ffn = b.mlp.forward(normed, n);
    // the next block's n1, or norm_f after the last block
    const bool last = i + 1 == blocks_.size();
    normed = add_and_norm(x, ffn, dropout_.key(b.layer, DropoutSite::FfnOutput), last ? norm_f_ : blocks_[i + 1].n1,
                          c.norm_eps, n.out, last ? "norm_f" : blocks_[i + 1].names.n1, last);
  }
  if (state) state->position += ids.dim(1);
  return named(add(linear(normed, lm_head_), lm_head_bias_), "logits");  // [B, T, vocab]
}

}  // namespace lina
