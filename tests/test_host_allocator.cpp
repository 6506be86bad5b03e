// The caching host allocator: size classes, reuse, and a training step that
// after the first one takes no new memory from the system.
#include <doctest/doctest.h>

#include <cstdint>

#include "autograd/functions.h"
#include "backend_cpu/host_allocator.h"
#include "models/model.h"
#include "models/optim.h"

using namespace lina;

TEST_CASE("host allocator: a size class holds the request, wastes at most 12.5 %, is a multiple of 64") {
  for (size_t bytes : {size_t(1), size_t(63), size_t(64), size_t(65), size_t(1000), size_t(4096),
                       size_t(4097), size_t(100000), size_t(1) << 20, (size_t(1) << 20) + 1,
                       size_t(123456789)}) {
    size_t cls = cpu::host_size_class(bytes);
    INFO(bytes << " -> " << cls);
    CHECK(cls >= bytes);
    CHECK(cls % 64 == 0);
    if (bytes > 1024) CHECK(double(cls - bytes) <= 0.125 * double(bytes));
    CHECK(cpu::host_size_class(cls) == cls);  // a class is its own class
  }
}

TEST_CASE("host allocator: a freed buffer is handed out again for the same class") {
  cpu::reset_host_memory_counters();
  void* a = cpu::host_alloc(300000);
  CHECK(reinterpret_cast<uintptr_t>(a) % 64 == 0);
  cpu::host_free(a);
  void* b = cpu::host_alloc(299000);  // same class
  CHECK(b == a);
  cpu::HostMemoryStats s = cpu::host_memory_stats();
  CHECK(s.requests == 2);
  CHECK(s.largest_request == 300000);
  cpu::host_free(b);
  cpu::release_cached();
  CHECK(cpu::host_memory_stats().cached_bytes == 0);
}

TEST_CASE("host allocator: after the first, a training step allocates nothing from the system") {
  LanguageModel model(make_config("hybrid", 16), 3);
  AdamW optimizer(model.params());
  Rng rng(1);
  std::vector<int32_t> ids(2 * 16);
  for (int32_t& id : ids) id = int32_t(rng.next_u64() % 16);
  Tensor x = Tensor::from_vector(ids, {2, 16});
  auto step = [&] {
    model.params().zero_grad();
    Var loss = cross_entropy(model.forward(x), x);
    loss.backward();
    optimizer.update(1e-3);
  };
  step();
  step();
  cpu::reset_host_memory_counters();
  int64_t held_before = cpu::host_memory_stats().peak_bytes;
  for (int i = 0; i < 3; ++i) step();
  cpu::HostMemoryStats s = cpu::host_memory_stats();
  CHECK(s.requests > 100);        // a step makes many tensors...
  CHECK(s.system_allocs == 0);    // ...all from buffers the allocator kept
  CHECK(s.peak_bytes == held_before);
}
