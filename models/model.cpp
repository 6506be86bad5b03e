#include "models/model.h"

#include <cmath>
#include <utility>

#include "models/mixers.h"

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

// ---- the names of intermediate tensors -------------------------------------------------------

LayerNames::LayerNames(int layer) {
  const std::string p = "blocks." + std::to_string(layer) + ".";
  auto name = [&](const char* what) { return intern_name(p + what); };
  n1 = name("n1");
  q_proj = name("mix.q_proj");
  k_proj = name("mix.k_proj");
  v_proj = name("mix.v_proj");
  qkv_proj = name("mix.qkv_proj");
  qkv_conv = name("mix.qkv_conv");
  q = name("mix.q");
  k = name("mix.k");
  v = name("mix.v");
  b_proj = name("mix.b_proj");
  beta = name("mix.beta");
  a_proj = name("mix.a_proj");
  log_alpha = name("mix.log_alpha");
  qkv = name("mix.qkv");
  beta_log_alpha = name("mix.beta_log_alpha");
  scores = name("mix.scores");
  weights = name("mix.weights");
  o = name("mix.o");
  o_norm = name("mix.o_norm");
  g_proj = name("mix.g_proj");
  gated = name("mix.gated");
  mix = name("mix");
  residual = name("residual");
  n2 = name("n2");
  ffn_hidden = name("ffn.hidden");
  ffn = name("ffn");
  out = name("out");
}

// ---- construction & initialisation (docs/spec.md §1, "init") ------------------------------

namespace {

// Registers parameters under the course's names (docs/spec.md §1.4) and
// initialises each as PyTorch's layers do by default; the values are drawn
// in registration order from one seeded generator. Matrices (two or more
// dimensions) are marked `decay`: the ones --decay-matrices decays.
struct Initialiser {
  ParameterStore& params;
  Rng rng;
  Var uniform(const std::string& name, const Shape& shape, double bound) {
    Var p = params.add(name, shape, /*decay=*/shape.size() >= 2);
    p.data().copy_from(Tensor::rand(shape, rng, -bound, bound, p.dtype()));
    return p;
  }
  // nn.Linear's weight [out, in] (and bias [out]): U(±1/√in).
  Var linear(const std::string& name, int64_t out, int64_t in) {
    return uniform(name, {out, in}, 1.0 / std::sqrt(double(in)));
  }
  Var bias(const std::string& name, int64_t out, int64_t in) {
    return uniform(name, {out}, 1.0 / std::sqrt(double(in)));
  }
  Var normal(const std::string& name, const Shape& shape, double std) {  // nn.Embedding: N(0, 1)
    Var p = params.add(name, shape, /*decay=*/true);
    p.data().copy_from(Tensor::randn(shape, rng, std, 0.0, p.dtype()));
    return p;
  }
  Var constant(const std::string& name, const Shape& shape, double value) {
    Var p = params.add(name, shape, /*decay=*/shape.size() >= 2);  // norm weights, a_proj's bias
    p.data().copy_from(Tensor::full(shape, value, p.dtype()));
    return p;
  }
};

void init_attention(Initialiser& init, const ModelConfig& c, const std::string& p, AttentionMixer& a) {
  const int64_t C = c.n_embd, kv = int64_t(c.n_kv_head) * c.head_size;
  a.q_proj = init.linear(p + "mix.q_proj.weight", C, C);
  a.k_proj = init.linear(p + "mix.k_proj.weight", kv, C);
  a.v_proj = init.linear(p + "mix.v_proj.weight", kv, C);
  a.o_proj = init.linear(p + "mix.o_proj.weight", C, C);
}

void init_recurrent(Initialiser& init, const ModelConfig& c, const std::string& p, RecurrentMixer& r) {
  const int64_t C = c.n_embd, H = c.n_head;
  r.q_proj = init.linear(p + "mix.q_proj.weight", C, C);
  r.k_proj = init.linear(p + "mix.k_proj.weight", C, C);
  r.v_proj = init.linear(p + "mix.v_proj.weight", C, C);
  // nn.Conv1d(3C, 3C, K, groups=3C): fan_in = K, so U(±1/√K) = U(±½) at K = 4.
  r.conv = init.uniform(p + "mix.conv.weight", {3 * C, 1, c.conv_kernel}, 1.0 / std::sqrt(double(c.conv_kernel)));
  const ScanRule rule = scan_rule(r.kind);
  if (uses_beta(rule)) {
    r.b_proj_w = init.linear(p + "mix.b_proj.weight", H, C);
    r.b_proj_b = init.bias(p + "mix.b_proj.bias", H, C);
  }
  if (learns_decay(rule)) {  // one gate per head, or per head and key channel (gla)
    const int64_t gates = decays_per_channel(rule) ? H * c.head_size : H;
    r.a_proj_w = init.linear(p + "mix.a_proj.weight", gates, C);
    r.a_proj_b = init.constant(p + "mix.a_proj.bias", {gates}, 3.0);  // α ≈ σ(3) ≈ 0.95
  }
  r.g_proj = init.linear(p + "mix.g_proj.weight", C, C);
  r.o_norm = init.constant(p + "mix.o_norm.weight", {c.head_size}, 1.0);
  r.o_proj = init.linear(p + "mix.o_proj.weight", C, C);
  // [W_q; W_k; W_v; W_g; W_b; W_a] (the gates those the rule has) and [b_b;
  // b_a]: one product for everything the scan and the output gate read, W_g
  // after W_v so that the conv reads the first 3C columns and the gates the
  // last ones, and one bias for the gates. (Registration keeps the course's
  // order: only the buffer's layout changes.)
  std::vector<std::string> one_product{p + "mix.q_proj.weight", p + "mix.k_proj.weight",
                                       p + "mix.v_proj.weight", p + "mix.g_proj.weight"};
  if (uses_beta(rule)) one_product.push_back(p + "mix.b_proj.weight");
  if (learns_decay(rule)) one_product.push_back(p + "mix.a_proj.weight");
  init.params.place_together(one_product);
  if (uses_beta(rule) && learns_decay(rule))
    init.params.place_together({p + "mix.b_proj.bias", p + "mix.a_proj.bias"});
}

}  // namespace

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
    Block b(i);
    b.kind = c.layers[size_t(i)];
    b.rec.kind = b.kind;
    if (b.kind == MixerKind::Attn) init_attention(init, c, p, b.attn);
    else init_recurrent(init, c, p, b.rec);
    b.mlp.gate = init.linear(p + "ffn.gate.weight", F, C);
    b.mlp.up = init.linear(p + "ffn.up.weight", F, C);
    b.mlp.down = init.linear(p + "ffn.down.weight", C, F);
    b.n1 = init.constant(p + "n1.weight", {C}, 1.0);
    b.n2 = init.constant(p + "n2.weight", {C}, 1.0);
    blocks_.push_back(b);
  }
  norm_f_ = init.constant("norm_f.weight", {C}, 1.0);
  lm_head_ = init.linear("lm_head.weight", c.vocab, C);
  lm_head_bias_ = init.bias("lm_head.bias", c.vocab, C);
  params_.finalize(dtype, device);
}

LanguageModel::~LanguageModel() = default;

InferenceState LanguageModel::new_state(int64_t batch) const {
  InferenceState s;
  const ModelConfig& c = config_;
  DType dt = params_.dtype();
  Device dev = params_.device();
  for (const Block& b : blocks_) {
    LayerCache l;
    if (b.kind != MixerKind::Attn) {
      l.state = Tensor::zeros({batch, c.n_head, c.head_size, c.head_size}, dt, dev);
      l.conv = Tensor::zeros({batch, c.conv_kernel - 1, 3 * c.n_embd}, dt, dev);
    }
    s.layers.push_back(l);
  }
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
    const LayerNames& n = b.names;
    LayerCache* cache = state ? &state->layers[i] : nullptr;
    Var h;
    if (b.kind == MixerKind::Attn) {
      h = b.attn.forward(c, normed, n, pos0, cache, dropout_, b.layer);
    } else {
      std::vector<double> alpha_mean;
      bool gated = alpha && learns_decay(scan_rule(b.kind));
      h = b.rec.forward(c, normed, n, cache, gated ? &alpha_mean : nullptr);
      if (gated) {
        alpha->layer.push_back(int(i));
        alpha->mean.push_back(alpha_mean);
      }
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
