// Running the `lina` binary from a test: its output, exit code and peak
// resident memory.
#pragma once
#include <doctest/doctest.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

namespace lina::test {

struct Result {
  int code = -1;        // exit status; −1 when killed by a signal
  std::string output;   // stdout and stderr together
  double peak_rss_mb = 0;  // the child's peak resident memory
};

// Runs a shell command line: its stdout (and whatever it redirects there) and exit code.
inline Result run_command(const std::string& cmd) {
  Result r;
  FILE* p = popen(cmd.c_str(), "r");
  REQUIRE(p != nullptr);
  std::array<char, 4096> buf{};
  while (fgets(buf.data(), int(buf.size()), p)) r.output += buf.data();
  int status = pclose(p);
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

// The lina under test: the build's (LINA_BINARY), or $LINA_TEST_BINARY where
// that is set, to run these tests against another build (one from before a
// fix, to see its test fail there).
inline std::string lina_binary() {
  const char* other = std::getenv("LINA_TEST_BINARY");
  return other && *other ? other : LINA_BINARY;
}

// Runs `lina <args>` through the shell with `env` (e.g. "A=1 B=2") in front.
inline Result run(const std::string& args, const std::string& env = "") {
  return run_command(env + (env.empty() ? "" : " ") + lina_binary() + " " + args + " 2>&1");
}

// Runs lina directly (no shell) to read its own peak resident memory.
inline Result run_measured(const std::vector<std::string>& args) {
  std::vector<char*> argv;
  std::string binary = lina_binary();
  argv.push_back(binary.data());
  std::vector<std::string> copy = args;
  for (std::string& a : copy) argv.push_back(a.data());
  argv.push_back(nullptr);
  Result r;
  pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    FILE* null = std::freopen("/dev/null", "w", stdout);
    (void)null;
    execv(binary.c_str(), argv.data());
    _exit(127);
  }
  int status = 0;
  struct rusage usage {};
  REQUIRE(wait4(pid, &status, 0, &usage) == pid);
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.peak_rss_mb = double(usage.ru_maxrss) / 1024.0;  // ru_maxrss is in KiB on Linux
  return r;
}

// A fresh folder for one test; the process id keeps concurrent test runs
// (two build folders, two checkouts) out of each other's way.
inline std::filesystem::path temp_dir(const std::string& name) {
  std::filesystem::path d = std::filesystem::temp_directory_path() /
                            ("lina_cli_" + name + "_" + std::to_string(::getpid()));
  std::filesystem::remove_all(d);
  std::filesystem::create_directories(d);
  return d;
}

inline int count_lines(const std::string& s) {
  int n = 0;
  for (char c : s) n += c == '\n';
  return n;
}

// Asserts the run failed with exactly one line mentioning `needle`.
inline Result expect_error(const std::string& args, const std::string& needle, const std::string& env = "") {
  Result r = run(args, env);
  INFO("lina " << args << "\n" << r.output);
  CHECK(r.code != 0);
  CHECK(r.code < 128);  // an exit, not a crash by signal
  CHECK(count_lines(r.output) == 1);
  CHECK(r.output.find("error") != std::string::npos);
  CHECK(r.output.find(needle) != std::string::npos);
  return r;
}

}  // namespace lina::test
