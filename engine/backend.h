// The compute backend interface (CPU, CUDA): one ragged forward over the model.
//
// Execute is the same for every backend and is the only way in: PlanForward
// (engine/forward_plan.h) validates the batch and reserves the control rows' blocks in
// the caller's KV transaction, the backend's Compute runs the planned rows. The caller
// then closes the transaction: commits the positions each sequence keeps, once
// (engine/kv/kv_transaction.h).
// A backend computes only; it never touches the cache's bookkeeping, and all backends
// accept and refuse exactly the same batches.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "engine/forward_batch.h"
#include "engine/forward_output.h"
#include "engine/forward_plan.h"
#include "engine/model/model_config.h"
#include "engine/kv/kv_transaction.h"
#include "engine/kv/paged_kv_cache.h"

namespace crossreg {

class Backend {
 public:
  virtual ~Backend() = default;
  Backend(const Backend&) = delete;
  Backend& operator=(const Backend&) = delete;

  // "cpu", "cuda" (or "fake" in scheduler tests).
  virtual std::string_view name() const = 0;
  // What it runs on, for logs and GetModelInfo: "AMD EPYC, 2 threads, AVX-512 BF16",
  // "NVIDIA H100 80GB HBM3 (sm_90, device 0)".
  virtual std::string device() const = 0;
  // Bytes of weights one forward streams (for roofline accounting).
  virtual int64_t WeightBytesPerForward() const = 0;

  const ModelConfig& model_config() const { return config_; }
  // The K/V storage layout; the PagedKvCache used with this backend must match it.
  const KvCacheConfig& kv_storage() const { return storage_; }

  // Runs every row of `batch` through the model: each control row's K/V lands in the
  // slot the cache assigns (blocks reserved in `kv`, which leaves those sequences open),
  // and each sequence's length is left as it was for the caller to commit what it
  // keeps. `out.logits` is resized to (full logit rows x vocab) and `out.summaries` to
  // the summary rows (BatchRow::summary), each in batch order. An invalid batch is
  // refused before anything is reserved or computed; a failed computation rolls `kv`
  // back. Either way the cache is left as it was.
  absl::Status Execute(const ForwardBatch& batch, KvTransaction& kv, ForwardOutput& out);
  // Execute, then commit every control row written (prefill, and callers that keep
  // the whole forward).
  absl::Status Forward(const ForwardBatch& batch, PagedKvCache& kv, ForwardOutput& out);
  // The same for a batch that asks for no summaries: `logits` is (logit rows x vocab).
  absl::Status Forward(const ForwardBatch& batch, PagedKvCache& kv, std::vector<float>& logits);

 protected:
  Backend(const ModelConfig& config, const KvCacheConfig& storage) : config_(config), storage_(storage) {}

  // Computes the planned rows: writes each control row's K/V at plan.slots[row] of
  // the backend's storage, the logits of plan.logit_rows that are not summaries to
  // out.logits and the summaries of plan.summary_rows to out.summaries, each in
  // order. Must not change the cache's bookkeeping.
  virtual absl::Status Compute(const ForwardPlan& plan, ForwardOutput& out) = 0;

 private:
  const ModelConfig config_;
  const KvCacheConfig storage_;
};

// For backends that compute every logit row where the decoder reads it (the CPU
// backend, test fakes): `dense` holds plan.logit_rows' logits in order; the full rows
// are copied to out.logits and the summary rows reduced into out.summaries with
// SummarizeLogitRow, the reference every backend's summaries must equal.
void SplitLogitRows(const ForwardPlan& plan, absl::Span<const float> dense, int vocab, ForwardOutput& out);

}  // namespace crossreg
