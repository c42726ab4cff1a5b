// A deterministic stand-in for the engine's compute, for pure scheduling tests: every
// row's logits are one-hot at (token * 7 + position) % vocab, so a request's output
// does not depend on what it was batched with. Only Compute is fake: batches go
// through the production Backend::Forward (the shared planner's validation and
// reservation, the commit), so the scheduler is tested against the real contract.
// It records each forward's shape.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <vector>

#include "engine/backend.h"
#include "engine/model/model_config.h"

namespace crossreg::testing {

// A model config the fake understands: no EOS, the given vocabulary and context.
ModelConfig FakeModelConfig(int vocab = 32, int max_position = 256);

// The greedy continuation the fake produces for a prompt, as a reference.
std::vector<int32_t> FakeGreedyContinuation(const std::vector<int32_t>& prompt, int max_new, int vocab);

class FakeBackend final : public Backend {
 public:
  // `kv` must match the PagedKvCache used with it.
  FakeBackend(const ModelConfig& config, const KvCacheConfig& kv) : Backend(config, kv) {}

  std::string_view name() const override { return "fake"; }
  std::string device() const override { return "closed-form logits"; }
  int64_t WeightBytesPerForward() const override { return 0; }

  // While closed, Forward blocks at its start (lets a test hold requests running).
  void CloseGate();
  void OpenGate();
  // Blocks until `n` forwards have started (counting blocked ones).
  void WaitForForwardsStarted(int64_t n);

  struct ForwardShape {
    int rows = 0;
    int logit_rows = 0;
    int predictive_rows = 0;
    int summary_rows = 0;  // logit rows returned as RowSummary
  };
  std::vector<ForwardShape> shapes() const;
  int64_t forwards() const;

 protected:
  absl::Status Compute(const ForwardPlan& plan, ForwardOutput& out) override;

 private:
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool gate_open_ = true;
  int64_t started_ = 0;
  std::vector<ForwardShape> shapes_;
};

}  // namespace crossreg::testing
