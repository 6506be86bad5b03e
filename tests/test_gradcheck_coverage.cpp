// Every op in core/ops.h must have at least one gradient check registered
// (tests/gradcheck.h explains how to add one). This test prints the table.
#include <doctest/doctest.h>

#include <iostream>
#include <map>

#include "tests/gradcheck.h"

using namespace lina;

TEST_CASE("every op has a float64 gradient check") {
  std::map<int, int> count;
  for (const auto& row : test::gradcheck_registry()) count[int(row.op)]++;
  for (int k = 0; k < int(OpKind::Count); ++k) {
    INFO("op '" << std::string(op_name(OpKind(k))) << "' has no gradient check row");
    CHECK(count[k] >= 1);
  }
  MESSAGE("gradient-check rows: " << test::gradcheck_registry().size() << " over "
                                  << int(OpKind::Count) << " ops");
}
