#include "experiments/lr_schedule.h"

#include <algorithm>

#include "core/error.h"
#include "models/optim.h"

namespace lina {

void LrSchedule::add(int from, int to, double peak_lr, int warmup, double min_lr) {
  segments_.push_back({from, to, peak_lr, min_lr, warmup});
}

double LrSchedule::lr(int update) const {
  check(!segments_.empty(), "learning-rate schedule: no segment");
  const Segment* s = &segments_.front();
  for (const Segment& segment : segments_)
    if (segment.from <= update) s = &segment;
  return lr_at(update - s->from, std::max(1, s->to - s->from), s->peak_lr, s->min_lr, s->warmup);
}

nlohmann::json LrSchedule::to_json() const {
  nlohmann::json out = nlohmann::json::array();
  for (const Segment& s : segments_)
    out.push_back({{"from", s.from}, {"to", s.to}, {"peak_lr", s.peak_lr}, {"min_lr", s.min_lr},
                   {"warmup", s.warmup}});
  return out;
}

LrSchedule LrSchedule::from_json(const nlohmann::json& segments) {
  LrSchedule schedule;
  for (const nlohmann::json& s : segments)
    schedule.segments_.push_back({s.at("from").get<int>(), s.at("to").get<int>(), s.at("peak_lr").get<double>(),
                                  s.at("min_lr").get<double>(), s.at("warmup").get<int>()});
  return schedule;
}

}  // namespace lina
