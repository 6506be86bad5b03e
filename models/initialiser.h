// Registers a model's parameters under the course's names (docs/spec.md
// §1.4) and initialises each as PyTorch's layers do by default; the values
// are drawn in registration order from one seeded generator, so a model and
// its mixers must register in the course's module order. Matrices (two or
// more dimensions) are marked `decay`: the ones --decay-matrices decays.
#pragma once
#include <cmath>
#include <string>

#include "core/rng.h"
#include "models/parameters.h"

namespace lina {

struct Initialiser {
  ParameterStore& params;
  Rng rng;
  Var uniform(const std::string& name, const Shape& shape, double bound) {
    Var p = params.add(name, shape, /*weight_decay=*/shape.size() >= 2);
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
    Var p = params.add(name, shape, /*weight_decay=*/true);
    p.data().copy_from(Tensor::randn(shape, rng, std, 0.0, p.dtype()));
    return p;
  }
  Var constant(const std::string& name, const Shape& shape, double value) {
    Var p = params.add(name, shape, /*weight_decay=*/shape.size() >= 2);  // norm weights, a_proj's bias
    p.data().copy_from(Tensor::full(shape, value, p.dtype()));
    return p;
  }
};

}  // namespace lina
