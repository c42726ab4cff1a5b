#include "engine/cpu/tile_order_chooser.h"

#include <algorithm>
#include <utility>

namespace crossreg::cpu {
namespace {

double Median(std::vector<double> v) {
  const auto mid = v.begin() + static_cast<std::ptrdiff_t>(v.size() / 2);
  std::nth_element(v.begin(), mid, v.end());
  return *mid;
}

}  // namespace

TileOrderChooser::Entry& TileOrderChooser::Find(const LinearCallShape& shape) {
  for (Entry& e : entries_) {
    if (e.shape == shape) return e;
  }
  Entry e;
  e.shape = shape;
  entries_.push_back(std::move(e));
  return entries_.back();
}

TileOrderChooser::Decision TileOrderChooser::Next(const LinearCallShape& shape) {
  std::lock_guard<std::mutex> lock(mu_);
  Entry& e = Find(shape);
  if (e.chosen && e.served < kServeCalls) {
    ++e.served;
    return {*e.chosen, false};
  }
  // kBlocked first: a shape seen only once (a short run) keeps the long-standing order.
  return {(e.handed_out++ % 2 == 0) ? TileOrder::kBlocked : TileOrder::kWholeK, true};
}

void TileOrderChooser::Report(const LinearCallShape& shape, TileOrder order, double seconds) {
  std::lock_guard<std::mutex> lock(mu_);
  Entry& e = Find(shape);
  e.seconds[static_cast<int>(order)].push_back(seconds);
  const auto& blocked = e.seconds[static_cast<int>(TileOrder::kBlocked)];
  const auto& whole = e.seconds[static_cast<int>(TileOrder::kWholeK)];
  if (blocked.size() < kTrials || whole.size() < kTrials) return;
  e.median_seconds[static_cast<int>(TileOrder::kBlocked)] = Median(blocked);
  e.median_seconds[static_cast<int>(TileOrder::kWholeK)] = Median(whole);
  // Ties keep kBlocked.
  e.chosen = e.median_seconds[static_cast<int>(TileOrder::kWholeK)] <
                     e.median_seconds[static_cast<int>(TileOrder::kBlocked)]
                 ? TileOrder::kWholeK
                 : TileOrder::kBlocked;
  e.seconds[0].clear();
  e.seconds[1].clear();
  e.handed_out = 0;
  e.served = 0;
}

std::optional<TileOrder> TileOrderChooser::Chosen(const LinearCallShape& shape) const {
  std::lock_guard<std::mutex> lock(mu_);
  for (const Entry& e : entries_) {
    if (e.shape == shape) return e.chosen;
  }
  return std::nullopt;
}

std::vector<TileOrderChooser::Outcome> TileOrderChooser::Decided() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<Outcome> out;
  for (const Entry& e : entries_) {
    if (!e.chosen) continue;
    out.push_back({.shape = e.shape, .chosen = *e.chosen, .median_seconds = {e.median_seconds[0], e.median_seconds[1]}});
  }
  return out;
}

TileOrderChooser& TileOrderChooser::Global() {
  static TileOrderChooser* const chooser = new TileOrderChooser;
  return *chooser;
}

}  // namespace crossreg::cpu
