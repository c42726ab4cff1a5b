// The compute backend interface (CPU, CUDA): one ragged forward over the model.
#pragma once

#include <memory>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "engine/forward_batch.h"
#include "engine/paged_kv_cache.h"

namespace crossreg {

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string_view name() const = 0;

  // Runs every row of `batch` through the model. Writes each row's K/V into the
  // backend's paged storage at the slots `kv` assigns (reserving blocks as needed)
  // and advances the sequences' lengths. `logits` is resized to
  // (num_logit_rows x vocab), rows in batch order.
  // All validation happens before any compute: on error nothing is written.
  virtual absl::Status Forward(const ForwardBatch& batch, PagedKvCache& kv,
                               std::vector<float>& logits) = 0;

  // Bytes of weights one forward streams (for roofline accounting).
  virtual int64_t WeightBytesPerForward() const = 0;
};

}  // namespace crossreg
