// lina_tests' main: doctest's, with a test case that skipped itself told to
// CTest by the exit code (tests/skip_exit_code.h).
#define DOCTEST_CONFIG_IMPLEMENT
#include "tests/skip_exit_code.h"

int main(int argc, char** argv) { return lina::test::run_doctest(argc, argv); }
