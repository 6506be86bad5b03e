#include "models/model.h"

#include <cmath>

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
    if (l.conv_q.defined()) n += l.conv_q.numel() + l.conv_k.numel() + l.conv_v.numel();
  return n;
}

// ---- the names of intermediate tensors -------------------------------------------------------

LayerNames::LayerNames(int layer) {
  const std::string p = "layers." + std::to_string(layer) + ".";
  auto name = [&](const char* what) { return intern_name(p + what); };
  norm1 = name("norm1");
  q_proj = name("mixer.q_proj");
  k_proj = name("mixer.k_proj");
  v_proj = name("mixer.v_proj");
  q_conv = name("mixer.q_conv");
  k_conv = name("mixer.k_conv");
  v_conv = name("mixer.v_conv");
  q = name("mixer.q");
  k = name("mixer.k");
  v = name("mixer.v");
  b_proj = name("mixer.b_proj");
  beta = name("mixer.beta");
  a_proj = name("mixer.a_proj");
  log_alpha = name("mixer.log_alpha");
  ba_proj = name("mixer.ba_proj");
  scores = name("mixer.scores");
  weights = name("mixer.weights");
  o = name("mixer.o");
  o_norm = name("mixer.o_norm");
  mixer = name("mixer");
  residual = name("residual");
  norm2 = name("norm2");
  mlp_hidden = name("mlp.hidden");
  mlp = name("mlp");
  out = name("out");
}

// ---- construction & initialisation (docs/spec.md §1, "init") ------------------------------

namespace {

// Registers parameters and records how each is initialised; the values are
// drawn in registration order from one seeded generator.
struct Initialiser {
  ParameterStore& params;
  Rng rng;
  Var normal(const std::string& name, const Shape& shape, double std, bool decay = true) {
    Var p = params.add(name, shape, decay);
    p.data().copy_from(Tensor::randn(shape, rng, std, 0.0, p.dtype()));
    return p;
  }
  Var uniform(const std::string& name, const Shape& shape, double lo, double hi) {
    Var p = params.add(name, shape, /*decay=*/true);
    p.data().copy_from(Tensor::rand(shape, rng, lo, hi, p.dtype()));
    return p;
  }
  Var constant(const std::string& name, const Shape& shape, double value) {
    Var p = params.add(name, shape, /*decay=*/false);  // norm weights and biases
    p.data().copy_from(Tensor::full(shape, value, p.dtype()));
    return p;
  }
};

}  // namespace

LanguageModel::LanguageModel(const ModelConfig& c, uint64_t seed, DType dtype, Device device)
    : config_(c) {
  check(c.n_layer() > 0, "model: a model needs at least one layer");
  check(c.n_head * c.head_size == c.n_embd && c.n_head % c.n_kv_head == 0,
        "model: n_head · head_size must equal n_embd and n_kv_head must divide n_head");
  Initialiser init{params_, Rng(seed)};
  const double std = 0.02, std_out = 0.02 / std::sqrt(2.0 * c.n_layer());
  const int64_t C = c.n_embd, H = c.n_head, kv = int64_t(c.n_kv_head) * c.head_size;
  tok_emb_ = init.normal("tok_emb.weight", {c.vocab, C}, std);
  for (int i = 0; i < c.n_layer(); ++i) {
    std::string p = "layers." + std::to_string(i) + ".";
    Block b(i);
    b.kind = c.layers[size_t(i)];
    b.norm1 = init.constant(p + "norm1.weight", {C}, 1.0);
    if (b.kind == MixerKind::Attn) {
      b.attn.wq = init.normal(p + "mixer.wq.weight", {C, C}, std);
      b.attn.wk = init.normal(p + "mixer.wk.weight", {kv, C}, std);
      b.attn.wv = init.normal(p + "mixer.wv.weight", {kv, C}, std);
      b.attn.wo = init.normal(p + "mixer.wo.weight", {C, C}, std_out);
    } else {
      RecurrentMixer& r = b.rec;
      r.kind = b.kind;
      r.wq = init.normal(p + "mixer.wq.weight", {C, C}, std);
      r.wk = init.normal(p + "mixer.wk.weight", {C, C}, std);
      r.wv = init.normal(p + "mixer.wv.weight", {C, C}, std);
      r.wo = init.normal(p + "mixer.wo.weight", {C, C}, std_out);
      // U(−½, ½): PyTorch's default for a depthwise conv of kernel 4 (docs/spec.md §1)
      r.conv_q = init.uniform(p + "mixer.conv_q.weight", {C, c.conv_kernel}, -0.5, 0.5);
      r.conv_k = init.uniform(p + "mixer.conv_k.weight", {C, c.conv_kernel}, -0.5, 0.5);
      r.conv_v = init.uniform(p + "mixer.conv_v.weight", {C, c.conv_kernel}, -0.5, 0.5);
      const ScanRule rule = scan_rule(b.kind);
      if (uses_beta(rule)) {
        r.b_proj_w = init.normal(p + "mixer.b_proj.weight", {H, C}, std);
        r.b_proj_b = init.constant(p + "mixer.b_proj.bias", {H}, 0.0);
      }
      if (uses_gate(rule)) {  // one gate per head, or per head and key channel (gla)
        const int64_t gates = gate_per_channel(rule) ? H * c.head_size : H;
        r.a_proj_w = init.normal(p + "mixer.a_proj.weight", {gates, C}, std);
        r.a_proj_b = init.constant(p + "mixer.a_proj.bias", {gates}, 3.0);  // α ≈ σ(3) ≈ 0.95
      }
      r.o_norm = init.constant(p + "mixer.o_norm.weight", {c.head_size}, 1.0);
    }
    b.norm2 = init.constant(p + "norm2.weight", {C}, 1.0);
    b.mlp.fc = init.normal(p + "mlp.fc.weight", {c.mlp_hidden, C}, std);
    b.mlp.proj = init.normal(p + "mlp.proj.weight", {C, c.mlp_hidden}, std_out);
    blocks_.push_back(b);
  }
  norm_f_ = init.constant("norm_f.weight", {C}, 1.0);
  head_ = init.normal("head.weight", {c.vocab, C}, std);
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
      Shape conv{batch, c.conv_kernel - 1, c.n_embd};
      l.conv_q = Tensor::zeros(conv, dt, dev);
      l.conv_k = Tensor::zeros(conv, dt, dev);
      l.conv_v = Tensor::zeros(conv, dt, dev);
    }
    s.layers.push_back(l);
  }
  return s;
}

// ---- forward --------------------------------------------------------------------------------

Var LanguageModel::forward(const Tensor& ids, InferenceState* state, AlphaStats* alpha) {
  check(ids.dtype() == DType::i32 && ids.ndim() == 2,
        "model: expected token ids int32 [B, T], got " + ids.describe());
  check(!state || state->layers.size() == blocks_.size(),
        "model: inference state has the wrong number of layers");
  const ModelConfig& c = config_;
  int64_t pos0 = state ? state->position : 0;
  Var x = named(embedding(tok_emb_, ids), "tok_emb");  // [B, T, C]
  if (alpha) *alpha = AlphaStats{};
  for (size_t i = 0; i < blocks_.size(); ++i) {
    const Block& b = blocks_[i];
    const LayerNames& n = b.names;
    LayerCache* cache = state ? &state->layers[i] : nullptr;
    Var h = named(rms_norm(x, b.norm1, c.norm_eps), n.norm1);
    if (b.kind == MixerKind::Attn) {
      h = b.attn.forward(c, h, n, pos0, cache);
    } else {
      std::vector<double> alpha_mean;
      bool gated = alpha && uses_gate(scan_rule(b.kind));
      h = b.rec.forward(c, h, n, cache, gated ? &alpha_mean : nullptr);
      if (gated) {
        alpha->layer.push_back(int(i));
        alpha->mean.push_back(alpha_mean);
      }
    }
    x = named(add(x, h), n.residual);
    x = named(add(x, b.mlp.forward(named(rms_norm(x, b.norm2, c.norm_eps), n.norm2), n)), n.out);
  }
  if (state) state->position += ids.dim(1);
  Var normed = named(rms_norm(x, norm_f_, c.norm_eps), "norm_f");
  return named(linear(normed, head_), "logits");  // [B, T, vocab]
}

}  // namespace lina
