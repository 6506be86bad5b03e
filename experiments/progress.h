// The live progress line of a training run: redrawn in place on a terminal,
// printed as plain lines (a few per run) when the output is piped.
#pragma once
#include <chrono>
#include <string>

namespace lina {

class Progress {
 public:
  // first_update: updates already done (a resumed run), for the ETA.
  Progress(int total_updates, bool quiet, int first_update = 0);
  // Reports update n (1-based) with its loss and learning rate.
  void update(int n, double loss, double lr, double tokens_per_s);
  // A line that stays (an evaluation result); clears the live line first.
  void note(const std::string& line);
  void finish();
  ~Progress() { finish(); }  // an error message then starts on a fresh line

 private:
  int total_, first_;
  bool quiet_, tty_;
  bool live_ = false;  // a redrawn line is on screen
  std::chrono::steady_clock::time_point start_, last_draw_;
};

}  // namespace lina
