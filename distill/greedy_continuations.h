// The base model's greedy continuations of many prefixes of one token stream, batched
// through the continuous-batching scheduler: plain AR decoding, exactly `window` new
// tokens each (EOS does not stop them). Requests are submitted in a sliding window, so
// the scheduler's queue never refuses one and memory stays bounded.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "scheduler/scheduler.h"
#include "distill/distill_prefix_sampler.h"

namespace crossreg {

struct ContinuationProgress {
  int64_t done = 0;    // prefixes continued
  int64_t total = 0;
  int64_t tokens = 0;  // continuation tokens committed so far
  double seconds = 0;  // since the first submission
};

struct GreedyContinuationOptions {
  int window = 16;         // new tokens per prefix
  int max_in_flight = 72;  // submitted and not yet finished; keep <= max_running + max_queue
  // Examples come in runs of this many nested prefixes of one text, longest first: the
  // rest of a run is submitted once the first has its first token, so their prompts find
  // its blocks in the prefix cache (when the engine caches) instead of being prefilled again.
  int group = 1;
  std::string request_id_prefix = "prefix-";  // request ids: prefix + example index
  std::chrono::milliseconds progress_interval{2000};
  std::function<void(const ContinuationProgress&)> on_progress;  // every interval, and once at the end
};

// Continuation of example i at [i * window, (i + 1) * window). Fails on the first
// request the scheduler refuses or fails (kError), or one that ends short of the window.
absl::StatusOr<std::vector<int32_t>> ContinueGreedily(Scheduler& scheduler, const std::vector<int32_t>& stream,
                                                      const PrefixSample& prefixes,
                                                      const GreedyContinuationOptions& options);

}  // namespace crossreg
