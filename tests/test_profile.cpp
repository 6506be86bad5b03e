// The kernel profile (core/profile.h): one row per entry point and phase,
// and for the products one row per shape.
#include <doctest/doctest.h>

#include <string>

#include "core/profile.h"
#include "core/tensor.h"
#include "dispatch/dispatch.h"

using namespace lina;

namespace {
// The profile's row for (op, detail), or an empty one (no calls).
profile::Entry find(const std::string& op, const std::string& detail) {
  for (const profile::Entry& e : profile::entries())
    if (e.op == op && e.detail == detail) return e;
  return profile::Entry{};
}
}  // namespace

TEST_CASE("profile: products are counted by shape, other entry points by op") {
  Tensor a = Tensor::ones({8, 4}), b = Tensor::ones({4, 2}), bt = Tensor::ones({3, 4});
  Tensor c = Tensor::zeros({8, 2}), c3 = Tensor::zeros({8, 3});
  profile::reset();
  profile::set_enabled(true);
  dispatch::gemm(dispatch::GemmShape{1, 8, 2, 4}, a, b, c);
  dispatch::gemm(dispatch::GemmShape{1, 8, 2, 4}, a, b, c, 1.0, 1.0);
  dispatch::gemm(dispatch::GemmShape{1, 8, 2, 4}, a, b, c, 1.0, 1.0);
  dispatch::GemmShape transposed{1, 8, 3, 4};
  transposed.tb = true;
  dispatch::gemm(transposed, a, bt, c3);
  dispatch::unary(UnaryFn::Exp, a);
  profile::set_enabled(false);
  CHECK(c.at(0) == 12.0);  // the products ran: 4, then += 4 twice
  dispatch::gemm(dispatch::GemmShape{1, 8, 2, 4}, a, b, c);  // not counted

  const profile::Entry plain = find("matmul", "8x2x4"), added = find("matmul", "8x2x4 +="),
                       with_bt = find("matmul", "8x3x4 B^T"), exp = find("unary", "");
  CHECK(plain.calls == 1);
  CHECK(added.calls == 2);
  CHECK(with_bt.calls == 1);
  CHECK(exp.calls == 1);
  CHECK(plain.phase == profile::Phase::Forward);
  CHECK(plain.seconds >= 0);
  CHECK(profile::entries().size() == 4);
  profile::reset();
  CHECK(profile::entries().empty());
}

TEST_CASE("profile: each entry point's stated bytes and FLOPs, summed over its calls") {
  Tensor a = Tensor::ones({8, 4}), b = Tensor::ones({4, 2}), c = Tensor::zeros({8, 2});
  Tensor x = Tensor::ones({16, 8}), w = Tensor::ones({8}), rstd;
  profile::reset();
  profile::add_work(1e9, 1e9);  // off: not kept for the next call
  profile::set_enabled(true);
  dispatch::gemm(dispatch::GemmShape{1, 8, 2, 4}, a, b, c);
  dispatch::gemm(dispatch::GemmShape{1, 8, 2, 4}, a, b, c);
  dispatch::gemm(dispatch::GemmShape{1, 8, 2, 4}, a, b, c, 1.0, 1.0);
  dispatch::rms_norm_forward(x, w, 1e-5, rstd);
  profile::set_enabled(false);
  const profile::Entry plain = find("matmul", "8x2x4"), added = find("matmul", "8x2x4 +=");
  CHECK(plain.flops == 2 * 2.0 * 8 * 2 * 4);           // 2·M·N·K a call
  CHECK(plain.bytes == 2 * 4.0 * (8 * 4 + 4 * 2 + 8 * 2));  // A, B read, C written, float32
  CHECK(added.bytes == 4.0 * (8 * 4 + 4 * 2 + 2 * 8 * 2));  // C read too
  const profile::Entry norm = find("rms_norm", "");
  CHECK(norm.bytes == 4.0 * (16 * 8 + 8 + 16 * 8 + 16));  // x, w read; y, rstd written
  CHECK(norm.flops > 0);
  profile::reset();
}
