// The recurrent mixers (docs/spec.md §1.2, §1.2b): every row of the registry
// (models/mixer_registry.cpp) with a write rule, each its rule's layer:
//   q, k, v = x W_qᵀ, x W_kᵀ, x W_vᵀ         (each 4 heads × 32), as one product
//   x [W_q; W_k; W_v]ᵀ (with W_g, W_b, W_a on the fused path): the weights
//   are neighbours in the parameter buffer, so the stacked weight is a view
//   of them (stacked_rows)
//   the causal depthwise conv (kernel 4) of [q | k | v], channel by channel,
//   then SiLU, with `conv.weight`
//   feature map on q, k: elu + 1, relu + 1e-5 or sigmoid + 1e-5 (linear),
//   else L2-normalise per head; q is not scaled
//   β = σ(x W_bᵀ + b_b) (delta rules), log α = log σ(x W_aᵀ + b_a) (learned
//   decays: one per head, or one per head and key channel)
// The fused path (scan_of_packed_inputs) makes q, k, v in one op as three
// planes and β, log α in one op as two, both from one product with
// [W_q; W_k; W_v; W_g; W_b; W_a], whose columns [3C, 4C) are also the output
// gate's x W_gᵀ; the scan reads the planes in place, the gated norm its
// output gate.
// The split path (scan_of_split_inputs) runs op by op: linear attention's
// feature map, and the composed reference.
//   o = scan(q, k, v, β, log α)  — the recurrence, see docs/recurrence.md and
//   docs/recurrence-gated.md; retnet's fixed decay lives in the scan itself
//   per-head RMSNorm of o, concat, times the output gate silu(x W_gᵀ), W_o
//   (dropped out in the residual sum, LanguageModel::forward); the fused
//   path takes the norm and the output gate as one op (rms_norm_gated)
#include <cmath>

#include "dispatch/layout.h"
#include "models/initialiser.h"
#include "models/mixer.h"

namespace lina {
namespace {

// The names of the layer's intermediate tensors ("blocks.{i}.mix.q" and so
// on), shown by the graph, the trace and the debugger; interned once.
struct RecurrentNames {
  explicit RecurrentNames(int layer) {
    const std::string p = "blocks." + std::to_string(layer) + ".mix";
    auto name = [&](const char* what) { return intern_name(p + what); };
    qkv_proj = name(".qkv_proj"), qkv_conv = name(".qkv_conv"), qkv = name(".qkv");
    q = name(".q"), k = name(".k"), v = name(".v");
    b_proj = name(".b_proj"), beta = name(".beta"), a_proj = name(".a_proj"), log_alpha = name(".log_alpha");
    beta_log_alpha = name(".beta_log_alpha");
    o = name(".o"), o_norm = name(".o_norm"), g_proj = name(".g_proj"), gated = name(".gated"), mix = name("");
  }
  const char *qkv_proj, *qkv_conv;  // x [W_q; W_k; W_v]ᵀ and SiLU(conv(...)) of it
  const char* qkv;                  // fused: q, k, v as planes [3, B, T, H, d]
  const char *q, *k, *v;            // what the scan reads (split path)
  const char *b_proj, *beta;        // x W_bᵀ + b_b and β = σ(...)
  const char *a_proj, *log_alpha;   // x W_aᵀ + b_a and log α = log σ(...)
  const char* beta_log_alpha;       // fused: β then log α, from one product
  const char* o;                    // the read-out o_t = S_t q_t
  const char* o_norm;               // per-head RMSNorm of o
  const char *g_proj, *gated;       // x W_gᵀ, silu(x W_gᵀ) ⊙ o_norm(o)
  const char* mix;                  // the mixer's output, (...) W_oᵀ
};

// The parameters (docs/spec.md §1.4 names, "blocks.{i}.mix.*").
struct RecurrentWeights {
  Var q_proj, k_proj, v_proj, o_proj;  // [C, C] each
  Var conv;                    // [3C, 1, K]: the depthwise conv of [q | k | v], channel by channel
  Var b_proj_w, b_proj_b;      // delta, gdn: [H, C], [H]
  Var a_proj_w, a_proj_b;      // a decay per head: [H, C], [H]; per head and key channel: [H·d, C], [H·d]
  Var g_proj;                  // [C, C]: the output gate silu(x W_gᵀ)
  Var o_norm;                  // [head_size], shared by the heads
};

// conv(x), a causal conv along x's axis 1 ([B, T, C]). With a cache, the
// conv sees the last K−1 inputs of the previous call instead of zero
// padding, the cache is updated, and the output keeps its last T steps
// along its own time axis (`out_time_axis`: 1, or 2 for an output in planes).
template <class Conv>
Var with_conv_cache(const Var& x, Tensor* cache, int out_time_axis, Conv conv) {
  if (!cache) return conv(x);
  int64_t T = x.dim(1), keep = cache->dim(1);  // keep = K − 1
  Var window = concat({Var(*cache), x}, 1);    // [B, K−1+T, C]
  *cache = slice(window.data(), 1, T, keep);   // the newest K−1 inputs
  return slice(conv(window), out_time_axis, keep, T);
}

// conv + SiLU: one op (fused) or causal_conv1d then silu.
Var conv_silu(const Var& x, const Var& weight, Tensor* cache, bool fused) {
  return with_conv_cache(x, cache, 1, [&](const Var& in) {
    return fused ? causal_conv1d_silu(in, weight) : silu(causal_conv1d(in, weight));
  });
}

// The feature map of q and k, on [B, T, H, d]: linear attention's positive
// map (elu(x) + 1, relu(x) + 1e-5 or sigmoid(x) + 1e-5), else L2-normalise.
Var feature_map(const ModelConfig& c, ScanRule rule, const Var& x) {
  if (rule != ScanRule::Linear) return l2_norm(x, 1e-12);
  switch (c.feature_map) {
    case FeatureMap::Relu: return add_scalar(relu(x), 1e-5);
    case FeatureMap::Sigmoid: return add_scalar(sigmoid(x), 1e-5);
    case FeatureMap::Elu1: break;
  }
  return add_scalar(elu(x), 1.0);  // elu(x) + 1 > 0
}

// The mean α of each head, over tokens (and key channels): log_alpha [B, T,
// H] or [B, T, H, d] (per_head = d).
void mean_decay_per_head(const Tensor& log_alpha, int64_t H, int64_t per_head,
                                std::vector<double>* decay_mean) {
  const int64_t rows = log_alpha.numel() / (H * per_head);
  Tensor alpha = dispatch::unary(UnaryFn::Exp, log_alpha);
  alpha = sum_to(alpha.reshape({rows, H * per_head}), {H * per_head});
  decay_mean->assign(size_t(H), 0.0);
  for (int64_t i = 0; i < H * per_head; ++i)
    (*decay_mean)[size_t(i / per_head)] += alpha.at(i) / double(rows * per_head);
}

// What every recurrent mixer's scan is given, besides q, k, v and β, log α.
struct ScanCall {
  ScanOptions options;
  Tensor initial_state;  // undefined: zeros
  Tensor* final_state;   // null: not kept
};

// The scan's inputs packed (every rule but linear attention's, with the
// fused conv): one product z = x [W_q; W_k; W_v; W_g; W_b; W_a]ᵀ (W_b, W_a
// where the rule has them; the weights side by side in the buffer:
// place_together) [B, T, 4C + N], N the columns of β and log α, handed
// back in *z for the output gate, whose x W_gᵀ is z's columns [3C, 4C)
// (gated_output); one op makes β
// and log α from z's last columns, laid out as two planes; one op makes q,
// k, v from its first 3C — conv + SiLU, q's and k's heads L2-normalised —
// laid out as three planes [3, B, T, H, d]. The scan reads every plane in
// place: nothing is split. The backward runs z's readers in reverse: the
// gated norm's first, returning z's whole gradient (0 outside the output
// gate's columns), then the conv's and beta_log_alpha's, each adding into
// its columns.
Var scan_of_packed_inputs(const RecurrentWeights& m, const ModelConfig& c, const Var& x,
                          const Var& taps, const RecurrentNames& n, Tensor* conv_cache,
                                 const ScanCall& call, std::vector<double>* decay_mean, Var* z) {
  const int64_t B = x.dim(0), T = x.dim(1), H = c.n_head, d = c.head_size, C = H * d;
  const ScanRule rule = call.options.rule;
  std::vector<Var> w{m.q_proj, m.k_proj, m.v_proj, m.g_proj}, b;  // the stacked weights; β's and log α's biases
  if (uses_beta(rule)) {
    w.push_back(m.b_proj_w);
    b.push_back(m.b_proj_b);
  }
  if (learns_decay(rule)) {
    w.push_back(m.a_proj_w);
    b.push_back(m.a_proj_b);
  }
  *z = named(linear(x, stacked_rows(w)), n.qkv_proj);  // [B, T, 4C + N]

  Var beta_and_log_alpha;  // the planes [β | log α], flat
  Shape decay_shape;
  if (!b.empty()) {
    beta_and_log_alpha = named(beta_log_alpha(*z, stacked_rows(b), uses_beta(rule) ? H : 0), n.beta_log_alpha);
    decay_shape = decays_per_channel(rule) ? Shape{B, T, H, d} : Shape{B, T, H};
    if (decay_mean && learns_decay(rule)) {
      const int64_t at = uses_beta(rule) ? B * T * H : 0;
      mean_decay_per_head(Tensor::view_of(beta_and_log_alpha.data(), at, decay_shape), H,
                          decays_per_channel(rule) ? d : 1, decay_mean);
    }
  }
  // [3, B, T, C]: q, k normalised per head of d, v as it is; with a conv
  // cache (generation) from z's first 3C columns, copied
  Var conv_in = conv_cache ? slice(*z, 2, 0, 3 * C) : *z;
  Var planes = with_conv_cache(conv_in, conv_cache, /*out_time_axis=*/2, [&](const Var& in) {
    return causal_conv1d_silu_l2_norm_planes(in, taps, d, /*planes=*/3, /*normed=*/2);
  });
  planes = named(reshape(planes, {3, B, T, H, d}), n.qkv);
  return scan_packed(call.options, planes, beta_and_log_alpha, decay_shape, call.initial_state, call.final_state);
}

// The scan's inputs op by op (linear attention, whose feature map is not an
// L2 norm, and the composed conv, the fused path's reference): conv + SiLU,
// split into q, k, v, the feature map; β = σ(x W_bᵀ + b_b), log α =
// log σ(x W_aᵀ + b_a), each from a product of its own.
Var scan_of_split_inputs(const RecurrentWeights& m, const ModelConfig& c, const Var& x,
                         const Var& taps, const RecurrentNames& n, Tensor* conv_cache,
                                const ScanCall& call, std::vector<double>* decay_mean) {
  const int64_t B = x.dim(0), T = x.dim(1), H = c.n_head, d = c.head_size, C = H * d;
  const Shape heads{B, T, H, d};
  const ScanRule rule = call.options.rule;
  // [W_q; W_k; W_v] [3C, C]: one product for q, k and v (and one for dx,
  // one for the three dW in the backward)
  Var qkv_proj = named(linear(x, stacked_rows({m.q_proj, m.k_proj, m.v_proj})), n.qkv_proj);  // [B, T, 3C]
  Var qkv = named(conv_silu(qkv_proj, taps, conv_cache, c.conv == Fusion::Fused), n.qkv_conv);
  std::vector<Var> parts = split(qkv, -1, {C, C, C});  // [B, T, C] each
  Var q = named(feature_map(c, rule, reshape(parts[0], heads)), n.q);
  Var k = named(feature_map(c, rule, reshape(parts[1], heads)), n.k);
  Var v = named(reshape(parts[2], heads), n.v);
  Var beta, log_alpha;  // [B, T, H]; log_alpha [B, T, H, d] when per key channel
  if (uses_beta(rule))
    beta = named(sigmoid(named(add(linear(x, m.b_proj_w), m.b_proj_b), n.b_proj)), n.beta);
  if (learns_decay(rule)) {
    Var a_proj = named(add(linear(x, m.a_proj_w), m.a_proj_b), n.a_proj);
    log_alpha = log_sigmoid(a_proj);  // −softplus(−z), never log(σ(z))
    if (decays_per_channel(rule)) log_alpha = reshape(log_alpha, heads);
    log_alpha = named(log_alpha, n.log_alpha);
    if (decay_mean) mean_decay_per_head(log_alpha.data(), H, decays_per_channel(rule) ? d : 1, decay_mean);
  }
  return scan(call.options, q, k, v, beta, log_alpha, call.initial_state, call.final_state);
}

// silu(x W_gᵀ) ⊙ o_norm(o) [B, T, C], the norm per head (o [B, T, H, d]).
// Fused, one op (rms_norm_gated): reading the output gate in place from the
// packed product z's columns [3C, 4C) where there is one, else from a
// product of its own. Composed: rms_norm, then swiglu.
Var gated_output(const RecurrentWeights& m, const ModelConfig& c, const Var& x, const Var& o, const Var& z,
                 const RecurrentNames& n) {
  const int64_t B = x.dim(0), T = x.dim(1), H = c.n_head, d = c.head_size, C = H * d;
  Var gated;
  if (z.defined()) {
    gated = rms_norm_gated(o, m.o_norm, z, c.norm_eps, /*gate_column=*/3 * C);
  } else {
    Var output_gate = named(linear(x, m.g_proj), n.g_proj);  // [B, T, C] = x W_gᵀ, from the mixer's input
    if (c.conv == Fusion::Fused) {
      gated = rms_norm_gated(o, m.o_norm, reshape(output_gate, {B, T, H, d}), c.norm_eps);
    } else {
      Var normed = named(rms_norm(o, m.o_norm, c.norm_eps), n.o_norm);
      gated = swiglu(output_gate, reshape(normed, {B, T, C}));
    }
  }
  return named(reshape(gated, {B, T, C}), n.gated);
}

class RecurrentMixer : public Mixer {
 public:
  RecurrentMixer(ScanRule rule, Initialiser& init, const ModelConfig& c, int layer)
      : rule_(rule), names_(layer) {
    register_weights(init, c, "blocks." + std::to_string(layer) + ".mix.");
  }

  // With a cache, continues from its state and its conv's last inputs.
  Var forward(const ModelConfig& c, const Var& x, const MixerCall& call) const override {
    const RecurrentWeights& m = weights_;
    const int64_t C = c.n_head * c.head_size;
    // conv.weight [3C, 1, K] holds the taps of q's channels, then k's, then v's
    Var taps = reshape(m.conv, {3 * C, m.conv.dim(2)});  // [3C, K]

    LayerCache* cache = call.cache;
    ScanCall scan_call;
    scan_call.options.rule = rule_;
    scan_call.options.form = cache ? ScanForm::Sequential : c.scan_form;  // generation: token by token
    scan_call.options.chunk = c.scan_chunk;
    scan_call.initial_state = cache ? cache->state : Tensor();
    scan_call.final_state = cache ? &cache->state : nullptr;
    Tensor* conv_cache = cache ? &cache->conv : nullptr;
    std::vector<double>* decay_mean = learns_decay(rule_) ? call.decay_mean : nullptr;
    const bool packed = rule_ != ScanRule::Linear && c.conv == Fusion::Fused;
    Var z;  // packed: the one product, whose columns [3C, 4C) are x W_gᵀ
    Var o = packed ? scan_of_packed_inputs(m, c, x, taps, names_, conv_cache, scan_call, decay_mean, &z)
                   : scan_of_split_inputs(m, c, x, taps, names_, conv_cache, scan_call, decay_mean);
    o = named(o, names_.o);  // [B, T, H, d]
    Var gated = gated_output(m, c, x, o, z, names_);  // [B, T, C]
    return named(linear(gated, m.o_proj), names_.mix);  // its dropout joins the residual sum
  }

  // S = 0 [B, H, d, d] (value × key) and the conv's K−1 zero inputs [B, K−1, 3C].
  LayerCache new_cache(const ModelConfig& c, int64_t batch, DType dtype, Device device) const override {
    LayerCache l;
    l.state = Tensor::zeros({batch, c.n_head, c.head_size, c.head_size}, dtype, device);
    l.conv = Tensor::zeros({batch, c.conv_kernel - 1, 3 * c.n_embd}, dtype, device);
    return l;
  }

 private:
  void register_weights(Initialiser& init, const ModelConfig& c, const std::string& p);

  ScanRule rule_;
  RecurrentNames names_;
  RecurrentWeights weights_;
};

void RecurrentMixer::register_weights(Initialiser& init, const ModelConfig& c, const std::string& p) {
  RecurrentWeights& r = weights_;
  const int64_t C = c.n_embd, H = c.n_head;
  r.q_proj = init.linear(p + "q_proj.weight", C, C);
  r.k_proj = init.linear(p + "k_proj.weight", C, C);
  r.v_proj = init.linear(p + "v_proj.weight", C, C);
  // nn.Conv1d(3C, 3C, K, groups=3C): fan_in = K, so U(±1/√K) = U(±½) at K = 4.
  r.conv = init.uniform(p + "conv.weight", {3 * C, 1, c.conv_kernel}, 1.0 / std::sqrt(double(c.conv_kernel)));
  if (uses_beta(rule_)) {
    r.b_proj_w = init.linear(p + "b_proj.weight", H, C);
    r.b_proj_b = init.bias(p + "b_proj.bias", H, C);
  }
  if (learns_decay(rule_)) {  // one decay per head, or per head and key channel
    const int64_t decays = decays_per_channel(rule_) ? H * c.head_size : H;
    r.a_proj_w = init.linear(p + "a_proj.weight", decays, C);
    r.a_proj_b = init.constant(p + "a_proj.bias", {decays}, 3.0);  // α ≈ σ(3) ≈ 0.95
  }
  r.g_proj = init.linear(p + "g_proj.weight", C, C);
  r.o_norm = init.constant(p + "o_norm.weight", {c.head_size}, 1.0);
  r.o_proj = init.linear(p + "o_proj.weight", C, C);
  // [W_q; W_k; W_v; W_g; W_b; W_a] (W_b, W_a where the rule has them) and
  // [b_b; b_a]: one product for everything the scan and the output gate
  // read, W_g after W_v so that the conv reads the first 3C columns and β
  // and log α the last ones, and one bias for β and log α. (Registration
  // keeps the course's order: only the buffer's layout changes.)
  std::vector<std::string> one_product{p + "q_proj.weight", p + "k_proj.weight", p + "v_proj.weight",
                                       p + "g_proj.weight"};
  if (uses_beta(rule_)) one_product.push_back(p + "b_proj.weight");
  if (learns_decay(rule_)) one_product.push_back(p + "a_proj.weight");
  init.params.place_together(one_product);
  if (uses_beta(rule_) && learns_decay(rule_)) init.params.place_together({p + "b_proj.bias", p + "a_proj.bias"});
}

}  // namespace

std::unique_ptr<Mixer> make_recurrent(const MixerRow& row, Initialiser& init, const ModelConfig& c, int layer) {
  return std::make_unique<RecurrentMixer>(row.rule, init, c, layer);
}

}  // namespace lina
