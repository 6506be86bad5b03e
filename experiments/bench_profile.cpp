// The profile table of `lina bench --profile` and the memory rate it is
// read against (experiments/bench_profile.h).
#include "experiments/bench_profile.h"

#include <algorithm>
#include <chrono>
#include <cstdarg>
#include <cstdio>
#include <vector>

#include "dispatch/dispatch.h"

namespace lina {

using nlohmann::json;

MemoryRate measure_memory_rate(int repeats) {
  const int64_t n = int64_t(1) << 24;  // floats per array: 64 MiB
  Tensor dst = Tensor::zeros({n}), src = Tensor::ones({n});
  dispatch::add_inplace(dst, src, 0.5);  // first touch of every page, threads started
  std::vector<double> ms;
  for (int i = 0; i < repeats; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    dispatch::add_inplace(dst, src, 0.5);
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(ms.begin(), ms.end());
  MemoryRate r;
  r.bytes = 3 * n * int64_t(sizeof(float));  // src and dst read, dst written
  r.ms = ms[ms.size() / 2];
  r.gbps = double(r.bytes) / (r.ms * 1e6);
  return r;
}

namespace {

// One entry of the profile with its limit (ms): the bytes at the memory
// rate or the FLOPs at the GEMM rate, whichever takes longer; 0 where the
// entry point states no work.
struct Row {
  std::string op, phase;
  long long calls = 0;
  double ms = 0, bytes = 0, flops = 0, limit_ms = 0;
};

std::vector<Row> rows_of(const json& entries, double gemm_gflops, double memory_gbps) {
  std::vector<Row> rows;
  for (const json& e : entries) {
    Row r;
    r.op = e["op"].get<std::string>();
    const std::string detail = e.value("detail", std::string());
    if (!detail.empty()) r.op += " " + detail;  // a product's shape
    r.phase = e["phase"].get<std::string>();
    r.calls = e["calls"].get<long long>();
    r.ms = double(e["ms"]);
    r.bytes = e.value("bytes", 0.0);
    r.flops = e.value("flops", 0.0);
    r.limit_ms = std::max(r.bytes / (memory_gbps * 1e6), r.flops / (gemm_gflops * 1e6));
    rows.push_back(r);
  }
  return rows;
}

std::string line(const char* format, ...) __attribute__((format(printf, 1, 2)));
std::string line(const char* format, ...) {
  char b[512];
  va_list args;
  va_start(args, format);
  std::vsnprintf(b, sizeof b, format, args);
  va_end(args);
  return std::string(b) + "\n";
}

}  // namespace

std::string profile_table(const json& row, int steps, double gemm_gflops, double memory_gbps) {
  const std::vector<Row> rows = rows_of(row["profile"]["entries"], gemm_gflops, memory_gbps);
  double total = 0, total_limit = 0;
  for (const Row& r : rows) total += r.ms, total_limit += r.limit_ms;
  std::string out = line("  limit: bytes at %.1f GB/s or FLOPs at %.1f GFLOP/s, the longer; ms summed over %d steps",
                         memory_gbps, gemm_gflops, steps);
  out += line("  %-38s %-9s %6s %9s %6s %8s %10s %5s %6s %9s %7s", "op", "phase", "calls", "ms", "share",
              "MB/call", "MFLOP/call", "%bw", "%gemm", "limit ms", "xlimit");
  for (const Row& r : rows) {
    if (r.limit_ms < 1e-3 * double(r.calls)) {  // no work stated, or under a microsecond a call
      out += line("  %-38s %-9s %6lld %9.2f %5.1f%%", r.op.c_str(), r.phase.c_str(), r.calls, r.ms,
                  100 * r.ms / total);
      continue;
    }
    const double seconds = r.ms * 1e-3;
    out += line("  %-38s %-9s %6lld %9.2f %5.1f%% %8.2f %10.1f %4.0f%% %5.0f%% %9.2f %7.1f", r.op.c_str(),
                r.phase.c_str(), r.calls, r.ms, 100 * r.ms / total, r.bytes / r.calls / 1e6,
                r.flops / r.calls / 1e6, 100 * r.bytes / seconds / (memory_gbps * 1e9),
                100 * r.flops / seconds / (gemm_gflops * 1e9), r.limit_ms, r.ms / r.limit_ms);
  }
  // The entries that lose the most time over their limits.
  std::vector<Row> worst = rows;
  std::sort(worst.begin(), worst.end(),
            [](const Row& a, const Row& b) { return a.ms - a.limit_ms > b.ms - b.limit_ms; });
  out += line("  at their limits the ops would take %.1f of these %.1f ms; the most time over a limit:",
              total_limit, total);
  for (size_t i = 0; i < std::min<size_t>(8, worst.size()); ++i)
    out += line("    %-38s %-9s %9.1f ms over (%.1f%% of the step)", worst[i].op.c_str(), worst[i].phase.c_str(),
                worst[i].ms - worst[i].limit_ms, 100 * (worst[i].ms - worst[i].limit_ms) / total);
  return out;
}

}  // namespace lina
