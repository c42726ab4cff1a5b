// Continuous batching must not change what a request generates: on the real CPU
// backend with a tiny random model and adapter, every request served among many
// others (mixed modes, chunked prefill, preemption and recomputation in a tiny
// cache) produces exactly what Generate() produces for it alone.
#include <algorithm>
#include <memory>
#include <string>

#include "engine/cpu/cpu_backend.h"
#include "scheduler/generate.h"
#include "engine/model/lora_adapter.h"
#include "engine/model/random_model.h"
#include "gtest/gtest.h"
#include "tests/testing/cpu_engine.h"
#include "scheduler/scheduler.h"
#include "tests/scheduler/event_recorder.h"

namespace crossreg {
namespace {

using testing::EventRecorder;

constexpr int kExactnessVocab = 48;
constexpr int32_t kPlaceholder = 47;

ModelConfig TinyModelConfig() {
  ModelConfig c;
  c.vocab_size = kExactnessVocab;
  c.hidden_size = 48;
  c.intermediate_size = 80;
  c.num_layers = 2;
  c.num_heads = 6;
  c.num_kv_heads = 2;
  c.head_dim = 8;
  c.max_position = 256;
  return c;
}

using testing::CpuEngine;
using testing::MakeCpuEngine;

struct Case {
  GenerationRequest spec;
  std::vector<int32_t> alone;  // Generate()'s output for it
};

GenerationRequest MakeSpec(int i) {
  static const DecodingMode kModes[] = {DecodingMode::kAutoregressive, DecodingMode::kLossless,
                                        DecodingMode::kLossy, DecodingMode::kNgram};
  GenerationRequest s;
  s.request_id = "req" + std::to_string(i);
  for (int t = 0; t < 3 + (i * 5) % 11; ++t) s.prompt_ids.push_back(static_cast<int32_t>((i * 13 + t * 7) % 40));
  s.max_new_tokens = 12 + (i * 3) % 10;
  s.stop_at_eos = false;
  s.decoding.mode = kModes[i % 4];
  s.decoding.gamma = 1 + i % 5;
  if (s.decoding.mode == DecodingMode::kLossy && i % 8 == 2) s.decoding.tau = -1.0f;  // a truly lossy one
  if (s.decoding.mode == DecodingMode::kLossless && i % 3 != 0) {  // forked refill, some with n-gram assist
    s.decoding.fork_outcomes = std::min(s.decoding.gamma, 1 + i % 3);
    s.decoding.fork_depth = i % 2 == 0 ? 0 : 2;
    s.decoding.ngram_assist = i % 3 == 2;
    if (i % 8 == 5) s.decoding.draft_layout = DraftLayout::kBlocks;  // outcome blocks
  }
  if (i % 6 == 5) {  // a few sampled requests: their RNG streams must not notice batching either
    s.sampling.temperature = 0.8f;
    s.sampling.seed = 100 + static_cast<uint64_t>(i);
  }
  return s;
}

// `adaptive_curve`: every request greedy, speculative ones with adaptive_gamma
// against that cost curve (their γ' then depends on the batch, their output must not).
std::vector<Case> MakeCases(int n, const Model& model, const LoraAdapter& adapter,
                            const ForwardCostCurve* adaptive_curve = nullptr) {
  CpuEngine alone = MakeCpuEngine(model, adapter, {4, 256});
  std::vector<Case> cases;
  for (int i = 0; i < n; ++i) {
    Case c;
    c.spec = MakeSpec(i);
    if (adaptive_curve != nullptr) {
      c.spec.sampling = SamplingParams{};
      // A truly lossy request's output depends on its draft lengths by design (which
      // drafts its lowered bar accepts), so it keeps its fixed γ here.
      const bool truly_lossy = c.spec.decoding.tau < 0.0f || c.spec.decoding.beta > 0.0f;
      c.spec.decoding.adaptive_gamma = c.spec.decoding.mode != DecodingMode::kAutoregressive && !truly_lossy;
    }
    const DecodingEnvironment env{
        .model = &model.config, .has_adapter = true, .placeholder_token = kPlaceholder, .cost_curve = adaptive_curve};
    auto r = Generate(*alone.backend, *alone.kv, c.spec, env);
    EXPECT_TRUE(r.ok()) << r.status();
    if (r.ok()) c.alone = r->ids;
    cases.push_back(std::move(c));
  }
  return cases;
}

// Runs every case through one scheduler at once; returns its final stats.
SchedulerStats RunAll(const std::vector<Case>& cases, const Model& model, const LoraAdapter& adapter,
                      KvCacheConfig kv_config, SchedulerOptions options, SpeculativeStats* totals = nullptr) {
  CpuEngine engine = MakeCpuEngine(model, adapter, kv_config);
  options.decoding.has_adapter = true;
  options.decoding.placeholder_token = kPlaceholder;
  Scheduler scheduler(options, *engine.backend, *engine.kv);
  EventRecorder rec;
  // All queued before it starts, so that they compete for the forwards and the cache
  // however the test thread is scheduled.
  for (const Case& c : cases) {
    EXPECT_TRUE(scheduler.Submit(c.spec, rec.HandlerFor(c.spec.request_id)).ok());
  }
  scheduler.Start();
  EXPECT_TRUE(rec.WaitForFinals(cases.size(), std::chrono::seconds(300)));
  scheduler.Shutdown(std::chrono::seconds(10));
  for (const Case& c : cases) {
    const auto r = rec.Get(c.spec.request_id);
    SCOPED_TRACE(c.spec.request_id + " mode " + DecodingModeName(c.spec.decoding.mode));
    if (!r.final_event.has_value()) {
      ADD_FAILURE() << "no final event";
      continue;
    }
    EXPECT_EQ(r.final_event->kind, RequestEvent::Kind::kFinished) << r.final_event->error;
    if (totals != nullptr && c.spec.decoding.mode != DecodingMode::kAutoregressive) {
      totals->forwards += r.final_event->stats.forwards;
      totals->ar_forwards += r.final_event->stats.ar_forwards;
    }
    EXPECT_EQ(r.tokens, c.alone);
    EXPECT_EQ(r.events_after_final, 0);
  }
  EXPECT_EQ(engine.kv->Stats().used_blocks, 0);
  return scheduler.Stats();
}

class SchedulerExactnessTest : public ::testing::Test {
 protected:
  void SetUp() override {
    model_ = MakeRandomModel(TinyModelConfig(), {DType::kF32, 7, 2.0f});
    RandomLoraOptions lo;
    lo.magnitude = 0.5f;
    lo.seed = 17;
    lo.placeholder_token_id = kPlaceholder;
    adapter_ = MakeRandomLoraAdapter(model_->config, lo);
  }
  std::unique_ptr<Model> model_;
  std::unique_ptr<LoraAdapter> adapter_;
};

TEST_F(SchedulerExactnessTest, ManyConcurrentMixedModeRequestsEqualRunningAlone) {
  const auto cases = MakeCases(24, *model_, *adapter_);
  SchedulerOptions options;
  options.max_batch_tokens = 40;  // forces chunked prefill next to decode rows
  const SchedulerStats stats = RunAll(cases, *model_, *adapter_, {4, 512}, options);
  EXPECT_EQ(stats.preemptions, 0);
  EXPECT_GT(stats.forwards, 0);
}

TEST_F(SchedulerExactnessTest, AdaptiveGammaUnderLoadKeepsGreedyOutputs) {
  // A GPU-like curve: flat until the forward holds 32 rows, then steep. The sequences
  // that plan first find cheap rows at the margin and draft; once the planned rows pass
  // the knee the later ones fall back to AR, so forwards mix both kinds.
  auto curve = ForwardCostCurve::FromPoints({{1, 1e-3}, {32, 1.1e-3}, {64, 2e-2}});
  ASSERT_TRUE(curve.ok());
  const auto cases = MakeCases(24, *model_, *adapter_, &*curve);
  SchedulerOptions options;
  options.decoding.cost_curve = &*curve;
  SpeculativeStats speculative;
  const SchedulerStats stats = RunAll(cases, *model_, *adapter_, {4, 512}, options, &speculative);
  EXPECT_GT(stats.forwards, 0);
  // Speculative requests ran some forwards as AR and speculated in others.
  EXPECT_GT(speculative.ar_forwards, 0);
  EXPECT_LT(speculative.ar_forwards, speculative.forwards);
}

TEST_F(SchedulerExactnessTest, TinyCachePreemptsAndRecomputesWithoutChangingOutputs) {
  const auto cases = MakeCases(16, *model_, *adapter_);
  // 80 positions: about two requests at a time.
  const SchedulerStats stats = RunAll(cases, *model_, *adapter_, {4, 20}, SchedulerOptions{});
  EXPECT_GT(stats.preemptions, 0);
}

}  // namespace
}  // namespace crossreg
