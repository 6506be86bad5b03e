// Backend dispatch for the fused causal attention (backend_cpu/attention.cpp,
// backend_cuda/attention.cu): shape checks, output allocation, one call.
#include <string>

#include "dispatch/backends.h"
#include "dispatch/dispatch.h"

namespace lina::dispatch {

using detail::on_backend;

namespace {

// The shape of q [B, Tq, H, d], k and v [B, Tk, Hkv, d], checked.
AttentionShape attention_shape(const Tensor& q, const Tensor& k, const Tensor& v, double scale,
                               const DropoutKey& dropout, const char* op) {
  const std::string name(op);
  check(q.ndim() == 4 && k.ndim() == 4 && v.ndim() == 4,
        name + ": expected q [B, Tq, H, d], k and v [B, Tk, Hkv, d], got " + q.describe() + ", " +
            k.describe() + ", " + v.describe());
  check(k.shape() == v.shape(), name + ": k and v differ: " + k.describe() + ", " + v.describe());
  check_same_dtype_device(q, k, op);
  check_same_dtype_device(q, v, op);
  AttentionShape s;
  s.B = q.dim(0), s.Tq = q.dim(1), s.H = q.dim(2), s.d = q.dim(3);
  s.Tk = k.dim(1), s.Hkv = k.dim(2);
  s.scale = scale;
  s.dropout = dropout;
  check(dropout.p >= 0 && dropout.p < 1, name + ": dropout probability must be in [0, 1)");
  check(k.dim(0) == s.B && k.dim(3) == s.d,
        name + ": q and k disagree on batch or head size: " + q.describe() + ", " + k.describe());
  check(s.Hkv > 0 && s.H % s.Hkv == 0,
        name + ": query heads (" + std::to_string(s.H) + ") must be a multiple of KV heads (" +
            std::to_string(s.Hkv) + ")");
  check(s.Tk >= s.Tq, name + ": causal attention needs at least as many keys as queries, got " +
                          std::to_string(s.Tk) + " keys for " + std::to_string(s.Tq) + " queries");
  return s;
}

}  // namespace

Tensor attention_forward(const Tensor& q, const Tensor& k, const Tensor& v, double scale,
                         Tensor& lse_out, const DropoutKey& dropout) {
  AttentionShape s = attention_shape(q, k, v, scale, dropout, "attention");
  Tensor out = Tensor::empty(q.shape(), q.dtype(), q.device());
  lse_out = Tensor::empty({s.B, s.H, s.Tq}, q.dtype(), q.device());
  // the causal half of QKᵀ and of PV, and the softmax over it
  const double scores = double(s.B * s.H) * double(s.Tq) * double(s.Tk) / 2;
  profile::add_work(detail::bytes_of(q, k, v, lse_out, out), scores * (4.0 * double(s.d) + 5.0));
  on_backend(q, "attention", [&](auto backend) {
    using B = decltype(backend);
    using T = typename B::type;
    B::attention_forward(s, q.data<T>(), k.data<T>(), v.data<T>(), lse_out.data<T>(), out.data<T>());
  });
  return out;
}

AttentionGrads attention_backward(const Tensor& q, const Tensor& k, const Tensor& v,
                                  const Tensor& lse, const Tensor& dout, double scale,
                                  const DropoutKey& dropout) {
  AttentionShape s = attention_shape(q, k, v, scale, dropout, "attention_backward");
  check(dout.shape() == q.shape() && lse.shape() == Shape{s.B, s.H, s.Tq},
        "attention_backward: expected dout like q and lse [B, H, Tq], got " + dout.describe() + ", " +
            lse.describe());
  check_same_dtype_device(q, dout, "attention_backward");
  check_same_dtype_device(q, lse, "attention_backward");
  AttentionGrads g;
  g.dq = Tensor::empty(q.shape(), q.dtype(), q.device());
  g.dk = Tensor::empty(k.shape(), k.dtype(), k.device());
  g.dv = Tensor::empty(v.shape(), v.dtype(), v.device());
  Tensor dscores = Tensor::empty({s.B, s.H, s.Tq, s.Tk}, q.dtype(), q.device());  // scratch
  // the causal half of P again (QKᵀ and the softmax), dP = dO Vᵀ, dV = Pᵀ dO, dQ = dS K, dK = dSᵀ Q,
  // and the softmax's backward
  const double scores = double(s.B * s.H) * double(s.Tq) * double(s.Tk) / 2;
  profile::add_work(detail::bytes_of(q, k, v, lse, dout, g.dq, g.dk, g.dv), scores * (10.0 * double(s.d) + 9.0));
  on_backend(q, "attention_backward", [&](auto backend) {
    using B = decltype(backend);
    using T = typename B::type;
    B::attention_backward(s, q.data<T>(), k.data<T>(), v.data<T>(), lse.data<T>(),
                          dout.data<T>(), dscores.data<T>(), g.dq.data<T>(), g.dk.data<T>(),
                          g.dv.data<T>());
  });
  return g;
}

}  // namespace lina::dispatch
