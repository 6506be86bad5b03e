#include "core/profile.h"

#include <algorithm>
#include <map>
#include <mutex>
#include <utility>

namespace lina::profile {

bool g_enabled = false;

namespace {
Phase g_phase = Phase::Forward;
thread_local int t_depth = 0;  // entry points being timed on this thread
std::mutex g_mutex;
std::map<std::pair<std::string, Phase>, Entry>& table() {
  static std::map<std::pair<std::string, Phase>, Entry> t;
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

bool begin_call() { return t_depth++ == 0; }

void end_call(const char* op, double seconds) {
  --t_depth;
  if (op == nullptr) return;  // a nested call: its time is in the outer one
  std::lock_guard<std::mutex> lock(g_mutex);
  Entry& e = table()[{op, g_phase}];
  if (e.calls == 0) e = Entry{op, g_phase, 0, 0};
  ++e.calls;
  e.seconds += seconds;
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
