#include "core/profile.h"

#include <algorithm>
#include <map>
#include <mutex>
#include <tuple>
#include <utility>

namespace lina::profile {

bool g_enabled = false;

namespace {
Phase g_phase = Phase::Forward;
thread_local int t_depth = 0;  // entry points being timed on this thread
thread_local const std::string* t_detail = nullptr;  // the innermost DetailScope's text
thread_local double t_bytes = 0, t_flops = 0;  // add_work's, for the next outermost call
std::mutex g_mutex;
using Key = std::tuple<std::string, std::string, Phase>;  // op, detail, phase
std::map<Key, Entry>& table() {
  static std::map<Key, Entry> t;
  return t;
}
}  // namespace

const char* phase_name(Phase p) {
  switch (p) {
    case Phase::Forward: return "forward";
    case Phase::Backward: return "backward";
    case Phase::Optimizer: return "optimizer";
  }
  return "?";
}

void set_enabled(bool on) { g_enabled = on; }
Phase phase() { return g_phase; }

PhaseScope::PhaseScope(Phase p) : previous_(g_phase) { g_phase = p; }
PhaseScope::~PhaseScope() { g_phase = previous_; }

DetailScope::DetailScope(const std::string& text) : previous_(t_detail) { t_detail = &text; }
DetailScope::~DetailScope() { t_detail = previous_; }

void add_work(double bytes, double flops) {
  if (!enabled() || t_depth > 0) return;
  t_bytes += bytes;
  t_flops += flops;
}

bool begin_call() { return t_depth++ == 0; }

void end_call(const char* op, double seconds) {
  --t_depth;
  if (t_depth == 0) {  // the outermost call ends: its stated work is used up
    const double bytes = t_bytes, flops = t_flops;
    t_bytes = t_flops = 0;
    if (op == nullptr) return;  // a call that threw
    std::lock_guard<std::mutex> lock(g_mutex);
    const std::string detail = t_detail ? *t_detail : std::string();
    Entry& e = table()[{op, detail, g_phase}];
    if (e.calls == 0) e = Entry{op, detail, g_phase, 0, 0, 0, 0};
    ++e.calls;
    e.seconds += seconds;
    e.bytes += bytes;
    e.flops += flops;
  }
}

std::vector<Entry> entries() {
  std::lock_guard<std::mutex> lock(g_mutex);
  std::vector<Entry> out;
  for (const auto& kv : table()) out.push_back(kv.second);
  std::sort(out.begin(), out.end(), [](const Entry& a, const Entry& b) { return a.seconds > b.seconds; });
  return out;
}

void reset() {
  std::lock_guard<std::mutex> lock(g_mutex);
  table().clear();
}

}  // namespace lina::profile
