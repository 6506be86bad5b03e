// The planted test case of ctest skip_accounting (tests/test_skip_accounting.py):
// with nothing planted it passes; with LINA_PLANTED_OUTCOME set it prints
// "SKIPPED:" and fails (before or after, or by throwing), only skips, skips in
// part, or passes, and the accounting test checks what ctest makes of each,
// through this test's own registration (CMakeLists.txt).
#include <doctest/doctest.h>

#include <cstdlib>
#include <stdexcept>
#include <string>

TEST_CASE("skip accounting: the planted test case (passes when LINA_PLANTED_OUTCOME is not set)") {
  const char* planted = std::getenv("LINA_PLANTED_OUTCOME");
  const std::string outcome = planted ? planted : "";
  if (outcome == "fail-then-skip") CHECK_MESSAGE(false, "a planted failure");
  if (outcome == "partial") CHECK(1 + 1 == 2);  // a part that ran and passed
  if (!outcome.empty() && outcome != "pass") MESSAGE("SKIPPED: planted (" << outcome << ")");
  if (outcome == "skip-then-fail") CHECK_MESSAGE(false, "a planted failure");
  if (outcome == "skip-then-throw") throw std::runtime_error("a planted exception");
}
