#include "experiments/progress.h"

#include <unistd.h>

#include <cstdio>

namespace lina {

Progress::Progress(int total_updates, bool quiet, int first_update)
    : total_(total_updates), first_(first_update), quiet_(quiet), tty_(isatty(fileno(stderr)) != 0),
      start_(std::chrono::steady_clock::now()), last_draw_(start_) {}

static std::string format_eta(double seconds) {
  int s = int(seconds + 0.5);
  char buf[32];
  if (s >= 3600) std::snprintf(buf, sizeof buf, "%dh%02dm", s / 3600, (s / 60) % 60);
  else std::snprintf(buf, sizeof buf, "%dm%02ds", s / 60, s % 60);
  return buf;
}

void Progress::update(int n, double loss, double lr, double tokens_per_s) {
  if (quiet_) return;
  auto now = std::chrono::steady_clock::now();
  double since_draw = std::chrono::duration<double>(now - last_draw_).count();
  bool last = n == total_;
  // Terminal: redraw at most 10 times a second. Pipe: about 20 lines a run.
  int every = total_ >= 20 ? total_ / 20 : 1;
  if (tty_ ? (since_draw < 0.1 && !last) : (n % every != 0 && !last && n != 1)) return;
  last_draw_ = now;
  double elapsed = std::chrono::duration<double>(now - start_).count();
  double eta = n > first_ ? elapsed / (n - first_) * (total_ - n) : 0.0;
  char line[200];
  std::snprintf(line, sizeof line, "step %5d/%d  loss %.4f  lr %.2e  %7.0f tok/s  ETA %s", n,
                total_, loss, lr, tokens_per_s, format_eta(eta).c_str());
  if (tty_) {
    std::fprintf(stderr, "\r\033[K%s", line);
    live_ = true;
  } else {
    std::fprintf(stderr, "%s\n", line);
  }
  std::fflush(stderr);
}

void Progress::note(const std::string& line) {
  if (quiet_) return;
  if (live_) std::fprintf(stderr, "\r\033[K");
  std::fprintf(stderr, "%s\n", line.c_str());
  live_ = false;
  std::fflush(stderr);
}

void Progress::finish() {
  if (live_) std::fprintf(stderr, "\n");
  live_ = false;
}

}  // namespace lina
