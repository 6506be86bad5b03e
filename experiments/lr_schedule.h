// The learning-rate schedule of a run: a list of segments, each a warm-up
// then a cosine from peak_lr down to min_lr (models/optim.h lr_at): with
// min_lr = peak_lr and no warm-up, a constant rate (the course's); the
// cosine schedule ends at peak_lr / 10. A run starts with one segment over all its updates; each
// --extend-to adds one with a fresh warm-up. Update s (0-based) uses the
// last segment with from <= s. Stored in the checkpoint and the run's json as
// [{from, to, peak_lr, min_lr, warmup}, ...].
#pragma once
#include <vector>

#include <nlohmann/json.hpp>

namespace lina {

class LrSchedule {
 public:
  struct Segment {
    int from = 0, to = 0;  // updates [from, to)
    double peak_lr = 0, min_lr = 0;
    int warmup = 0;
  };
  void add(int from, int to, double peak_lr, int warmup, double min_lr);
  double lr(int update) const;  // needs at least one segment
  bool empty() const { return segments_.empty(); }

  nlohmann::json to_json() const;
  static LrSchedule from_json(const nlohmann::json& segments);

 private:
  std::vector<Segment> segments_;
};

}  // namespace lina
