// Backend dispatch of the scan: the recurrences of the recurrent mixers.
#include <string>

#include "dispatch/backends.h"
#include "dispatch/dispatch.h"

namespace lina::dispatch {

using detail::on_backend;

namespace {

// Checks q, k, v [B, T, H, d] and the β and log α the rule uses, [B, T, H] (or
// [B, T, H, d] for a per-channel decay; the others must be undefined);
// returns the dimensions.
ScanShape check_scan_inputs(const ScanOptions& c, const Tensor& q, const Tensor& k,
                                 const Tensor& v, const Tensor& beta, const Tensor& log_alpha) {
  check(q.defined() && k.defined() && v.defined(), "scan: q, k and v are required");
  check(q.ndim() == 4 && q.numel() > 0,
        "scan: q must be a non-empty [B, T, H, d], got " + shape_str(q.shape()));
  check(k.shape() == q.shape() && v.shape() == q.shape(),
        "scan: q, k, v must share one shape [B, T, H, d], got q " + shape_str(q.shape()) + ", k " +
            shape_str(k.shape()) + ", v " + shape_str(v.shape()));
  check_same_dtype_device(q, k, "scan");
  check_same_dtype_device(q, v, "scan");
  check(c.form == ScanForm::Sequential || c.chunk > 0,
        "scan: chunk length must be positive, got " + std::to_string(c.chunk));
  const Shape head_shape{q.dim(0), q.dim(1), q.dim(2)};
  auto check_optional_input = [&](const Tensor& x, bool used, const char* name, bool per_channel) {
    if (!used) {
      check(!x.defined(), "scan: the " + std::string(scan_rule_name(c.rule)) + " rule takes no " + name);
      return;
    }
    const Shape expected = per_channel ? q.shape() : head_shape;
    check(x.defined() && x.shape() == expected,
          "scan: the " + std::string(scan_rule_name(c.rule)) + " rule needs " + name +
              (per_channel ? " [B, T, H, d] = " : " [B, T, H] = ") + shape_str(expected) +
              (x.defined() ? ", got " + shape_str(x.shape()) : ""));
    check_same_dtype_device(q, x, "scan");
  };
  check_optional_input(beta, uses_beta(c.rule), "beta", false);
  check_optional_input(log_alpha, learns_decay(c.rule), "log_alpha", decays_per_channel(c.rule));
  ScanShape s;
  s.B = q.dim(0), s.T = q.dim(1), s.H = q.dim(2), s.d = q.dim(3);
  s.rule = c.rule;
  return s;
}

// A state-shaped argument ([B, H, d, d], or [B, H, steps, d, d] for the saved states).
void check_scan_state(const Tensor& x, const Tensor& q, const Shape& expected, const char* name) {
  check(x.shape() == expected, std::string("scan: ") + name + " must be " +
                                   shape_str(expected) + ", got " + shape_str(x.shape()));
  check_same_dtype_device(q, x, "scan");
}

// States kept for the backward: one per token, or one per chunk.
int64_t scan_saved_steps(const ScanOptions& c, int64_t T) {
  return c.form == ScanForm::Chunked ? (T + c.chunk - 1) / c.chunk : T;
}

// The forward keeps Y, W, U for the backward (ScanSaved).
bool keeps_solve(const ScanOptions& c, const ScanShape& s) {
  return c.form == ScanForm::Chunked && scan_keeps_solve(s.rule, s.T, c.chunk);
}

template <class T> T* data_or_null(const Tensor& x) { return x.defined() ? x.data<T>() : nullptr; }

template <class T>
ScanInputs<T> scan_inputs(const Tensor& q, const Tensor& k, const Tensor& v,
                               const Tensor& beta, const Tensor& log_alpha) {
  return {q.data<T>(), k.data<T>(), v.data<T>(), beta.defined() ? beta.data<T>() : nullptr,
          log_alpha.defined() ? log_alpha.data<T>() : nullptr};
}

}  // namespace

Tensor scan_forward(const ScanOptions& options, const Tensor& q, const Tensor& k, const Tensor& v,
                    const Tensor& beta, const Tensor& log_alpha, const Tensor& initial_state,
                    Tensor& final_state, ScanSaved* saved) {
  const ScanShape s = check_scan_inputs(options, q, k, v, beta, log_alpha);
  const Shape state_shape{s.B, s.H, s.d, s.d};
  if (initial_state.defined()) check_scan_state(initial_state, q, state_shape, "initial_state");
  Tensor o = Tensor::empty(q.shape(), q.dtype(), q.device());
  final_state = Tensor::empty(state_shape, q.dtype(), q.device());
  if (saved) {
    *saved = ScanSaved();
    saved->states = Tensor::empty({s.B, s.H, scan_saved_steps(options, s.T), s.d, s.d}, q.dtype(), q.device());
    if (keeps_solve(options, s)) {
      saved->Y = Tensor::empty(q.shape(), q.dtype(), q.device());
      saved->W = Tensor::empty(q.shape(), q.dtype(), q.device());
      saved->U = Tensor::empty(q.shape(), q.dtype(), q.device());
    }
  }
  // one state write and one read per token and head (what the model's FLOPs count)
  const double state_flops = 2.0 * double(s.B * s.T * s.H) * double(s.d * s.d);
  profile::add_work(detail::bytes_of(q, k, v, beta, log_alpha, initial_state, o, final_state) +
                        (saved ? detail::bytes_of(saved->states, saved->Y, saved->W, saved->U) : 0.0),
                    2 * state_flops);
  on_backend(q, "scan", [&](auto backend) {
    using B = decltype(backend);
    using T = typename B::type;
    const ScanInputs<T> in = scan_inputs<T>(q, k, v, beta, log_alpha);
    const T* initial = data_or_null<T>(initial_state);
    const ScanSaved none;
    const ScanSaved& keep = saved ? *saved : none;  // undefined tensors: nothing kept
    if (options.form == ScanForm::Chunked) {
      const ScanChunkedSaved<T> kept{data_or_null<T>(keep.states), data_or_null<T>(keep.Y),
                                     data_or_null<T>(keep.W), data_or_null<T>(keep.U)};
      B::scan_chunked_forward(s, options.chunk, in, initial, o.data<T>(), final_state.data<T>(), kept);
    } else {
      B::scan_sequential_forward(s, in, initial, o.data<T>(), final_state.data<T>(),
                                 data_or_null<T>(keep.states));
    }
  });
  return o;
}

ScanGrads scan_backward(const ScanOptions& options, const Tensor& q, const Tensor& k,
                        const Tensor& v, const Tensor& beta, const Tensor& log_alpha,
                        const ScanSaved& saved, const Tensor& dout,
                        const Tensor& dfinal_state, const ScanGrads& into) {
  const ScanShape s = check_scan_inputs(options, q, k, v, beta, log_alpha);
  const Shape state_shape{s.B, s.H, s.d, s.d};
  check_scan_state(saved.states, q, {s.B, s.H, scan_saved_steps(options, s.T), s.d, s.d},
                   "saved states");
  if (keeps_solve(options, s)) {
    check_scan_state(saved.Y, q, q.shape(), "saved Y");
    check_scan_state(saved.W, q, q.shape(), "saved W");
    check_scan_state(saved.U, q, q.shape(), "saved U");
  } else {
    check(!saved.Y.defined() && !saved.W.defined() && !saved.U.defined(),
          "scan: saved Y, W, U given where the forward keeps none");
  }
  check_scan_state(dout, q, q.shape(), "dout");
  if (dfinal_state.defined()) check_scan_state(dfinal_state, q, state_shape, "dfinal_state");
  // each gradient in its buffer from `into`, else in a new one
  auto buffer = [&](const Tensor& given, const Tensor& like, const char* what) {
    if (!given.defined()) return Tensor::empty(like.shape(), q.dtype(), q.device());
    check(given.shape() == like.shape() && given.dtype() == q.dtype() && given.device() == q.device(),
          std::string("scan_backward: the buffer for ") + what + " is " + given.describe() +
              ", expected " + like.describe());
    return given;
  };
  ScanGrads g;
  g.dq = buffer(into.dq, q, "dq");
  g.dk = buffer(into.dk, q, "dk");
  g.dv = buffer(into.dv, q, "dv");
  if (uses_beta(s.rule)) g.dbeta = buffer(into.dbeta, beta, "dbeta");
  if (learns_decay(s.rule)) g.dlog_alpha = buffer(into.dlog_alpha, log_alpha, "dlog_alpha");
  g.dinitial_state = Tensor::empty(state_shape, q.dtype(), q.device());
  // twice the forward's state products (docs/performance.md, "model FLOPs")
  const double state_flops = 2.0 * double(s.B * s.T * s.H) * double(s.d * s.d);
  profile::add_work(detail::bytes_of(q, k, v, beta, log_alpha, saved.states, saved.Y, saved.W, saved.U, dout,
                                     dfinal_state, g.dq, g.dk, g.dv, g.dbeta, g.dlog_alpha, g.dinitial_state),
                    4 * state_flops);
  on_backend(q, "scan", [&](auto backend) {
    using B = decltype(backend);
    using T = typename B::type;
    const ScanInputs<T> in = scan_inputs<T>(q, k, v, beta, log_alpha);
    const ScanInputGrads<T> out{g.dq.data<T>(), g.dk.data<T>(), g.dv.data<T>(),
                                     uses_beta(s.rule) ? g.dbeta.data<T>() : nullptr,
                                     learns_decay(s.rule) ? g.dlog_alpha.data<T>() : nullptr,
                                     g.dinitial_state.data<T>()};
    const T* dfinal = dfinal_state.defined() ? dfinal_state.data<T>() : nullptr;
    if (options.form == ScanForm::Chunked) {
      const ScanChunkedSaved<const T> kept{saved.states.data<T>(), data_or_null<T>(saved.Y),
                                           data_or_null<T>(saved.W), data_or_null<T>(saved.U)};
      B::scan_chunked_backward(s, options.chunk, in, kept, dout.data<T>(), dfinal, out);
    } else {
      B::scan_sequential_backward(s, in, saved.states.data<T>(), dout.data<T>(), dfinal, out);
    }
  });
  return g;
}

}  // namespace lina::dispatch
