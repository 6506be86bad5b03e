// How a doctest program tells CTest that a test case skipped itself: by its
// exit code, never by what it printed. A test case that cannot run where it
// is, in whole or in part, says so with MESSAGE("SKIPPED: why"); when every
// test case that ran said so and none failed, run_doctest returns 77, which
// CMakeLists.txt gives CTest as SKIP_RETURN_CODE. A failure is a failure
// whatever the test printed: CTest's SKIP_REGULAR_EXPRESSION, used before,
// reported a test whose output held "SKIPPED:" as skipped even when it failed.
//
// Include once, in the file that defines main, after DOCTEST_CONFIG_IMPLEMENT.
#pragma once
#include <doctest/doctest.h>

#include <cstring>

namespace lina::test {

constexpr int kSkipExitCode = 77;

// A doctest listener: counts the test cases that ran and those that said
// "SKIPPED:" (once each, however many times they said it).
struct SkipCounter : doctest::IReporter {
  static inline int ran = 0, skipped = 0;
  bool this_one_skipped = false;

  explicit SkipCounter(const doctest::ContextOptions&) {}
  void test_case_start(const doctest::TestCaseData&) override {
    ++ran;
    this_one_skipped = false;
  }
  void log_message(const doctest::MessageData& message) override {
    if (!this_one_skipped && std::strncmp(message.m_string.c_str(), "SKIPPED:", 8) == 0) {
      this_one_skipped = true;
      ++skipped;
    }
  }
  // The rest of doctest's events change nothing here.
  void report_query(const doctest::QueryData&) override {}
  void test_run_start() override {}
  void test_run_end(const doctest::TestRunStats&) override {}
  void test_case_reenter(const doctest::TestCaseData&) override {}
  void test_case_end(const doctest::CurrentTestCaseStats&) override {}
  void test_case_exception(const doctest::TestCaseException&) override {}
  void subcase_start(const doctest::SubcaseSignature&) override {}
  void subcase_end() override {}
  void log_assert(const doctest::AssertData&) override {}
  void test_case_skipped(const doctest::TestCaseData&) override {}
};
DOCTEST_REGISTER_LISTENER("lina_skips", 1, SkipCounter);

// doctest's run: its own exit code when something failed (or nothing ran);
// kSkipExitCode when every test case that ran skipped itself; else 0.
inline int run_doctest(int argc, char** argv) {
  doctest::Context context(argc, argv);
  const int result = context.run();
  if (result != 0 || context.shouldExit() || SkipCounter::ran == 0) return result;
  return SkipCounter::skipped == SkipCounter::ran ? kSkipExitCode : 0;
}

}  // namespace lina::test
