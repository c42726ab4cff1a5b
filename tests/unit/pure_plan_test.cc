// Planning has no side effects: SequenceDecoder::Plan is const, so planning a forward
// twice gives the same plan and changes nothing; OnForward refuses a plan made for an
// earlier state. What learns (acceptance, probes) sits behind
// DraftLengthController::Choose and Observe.
#include <memory>
#include <vector>

#include "engine/decoding/draft_length_controller.h"
#include "engine/decoding/sequence_decoder.h"
#include "engine/forward_output.h"
#include "engine/model/random_model.h"
#include "gtest/gtest.h"
#include "tests/testing/tiny_models.h"

namespace crossreg {
namespace {

bool SameRows(const StepPlan& a, const StepPlan& b) {
  if (a.rows.size() != b.rows.size() || a.drafts != b.drafts || a.main_chain != b.main_chain ||
      a.fork_sizes != b.fork_sizes || a.assisted_drafts != b.assisted_drafts || a.ngram_match != b.ngram_match) {
    return false;
  }
  for (size_t i = 0; i < a.rows.size(); ++i) {
    const BatchRow &x = a.rows[i], &y = b.rows[i];
    if (x.seq != y.seq || x.position != y.position || x.token != y.token || x.predictive != y.predictive ||
        x.branch != y.branch || x.want_logits != y.want_logits || x.summary != y.summary) {
      return false;
    }
  }
  return true;
}

GenerationRequest Request(DecodingMode mode, bool assist) {
  GenerationRequest req;
  req.prompt_ids = {3, 4, 5, 3, 4, 5, 3, 4};
  req.max_new_tokens = 40;
  req.stop_at_eos = false;
  req.sampling.temperature = 0.8f;
  req.sampling.seed = 3;
  req.decoding.mode = mode;
  req.decoding.gamma = 4;
  req.decoding.ngram_assist = assist;
  if (mode == DecodingMode::kLossless) req.decoding.fork_outcomes = 2, req.decoding.fork_depth = 2;
  return req;
}

TEST(PurePlanTest, PlanningTwiceGivesTheSamePlanAndAStalePlanIsRefused) {
  auto model = MakeRandomModel(testing::TinyConfig(48), {DType::kF32, 5, 2.0f});
  auto adapter = testing::TinyAdapter(model->config, 0.5f, 15);
  testing::EngineUnderTest engine = testing::MakeEngine(*model, adapter.get());
  for (const auto& [mode, assist] :
       {std::pair{DecodingMode::kLossless, false}, std::pair{DecodingMode::kLossless, true},
        std::pair{DecodingMode::kNgram, false}}) {
    SCOPED_TRACE(::testing::Message() << DecodingModeName(mode) << (assist ? " with n-gram assist" : ""));
    const GenerationRequest req = Request(mode, assist);
    ASSERT_TRUE(ValidateGenerationRequest(req, engine.env).ok());
    SequenceDecoder decoder(req, engine.env, engine.kv->CreateSequence());
    ForwardBatch batch;
    ForwardOutput out;
    int decode_forwards = 0;
    while (!decoder.finished()) {
      const DraftChoice choice = decoder.Choose();
      const StepPlan plan = decoder.Plan(choice, 3);
      EXPECT_TRUE(SameRows(plan, decoder.Plan(choice, 3))) << "forward " << decode_forwards;
      batch.rows = plan.rows;
      KvTransaction transaction(*engine.kv);
      ASSERT_TRUE(engine.backend->Execute(batch, transaction, out).ok());
      absl::StatusOr<StepOutcome> step = decoder.OnForward(plan, LogitRows(out.logits, out.summaries));
      ASSERT_TRUE(step.ok()) << step.status();
      ASSERT_TRUE(transaction.Commit(decoder.sequence(), step->kv_length).ok());
      // The same plan again is stale now: its state has moved on.
      EXPECT_EQ(decoder.OnForward(plan, LogitRows(out.logits, out.summaries)).status().code(),
                absl::StatusCode::kFailedPrecondition);
      decode_forwards += plan.prefill() ? 0 : 1;
    }
    EXPECT_GT(decoder.stats().drafted, 0);
    EXPECT_EQ(decoder.stats().forwards, decode_forwards);
    engine.kv->Free(decoder.sequence());
  }
}

// Choose follows what Observe saw: where a row costs a ninth of a one-row forward, drafts that are always
// accepted are drafted, drafts that never are give way to AR.
TEST(DraftLengthControllerTest, ChooseFollowsTheObservedVerdicts) {
  auto flat = ForwardCostCurve::FromPoints({{1, 1e-3}, {64, 8e-3}});
  ASSERT_TRUE(flat.ok());
  const ModelConfig config = testing::TinyConfig(48);
  DecodingEnvironment env;
  env.model = &config;
  env.cost_curve = &*flat;
  GenerationRequest req;
  req.decoding.mode = DecodingMode::kLossless;
  req.decoding.gamma = 6;
  req.decoding.adaptive_gamma = true;
  const DraftCost cost{&*flat, 1, 1, 0};
  DraftLengthController good(req, env), bad(req, env);
  for (int f = 0; f < 40; ++f) {
    good.Observe({}, 0, std::vector<bool>(6, true));
    bad.Observe({}, 0, {false});
  }
  EXPECT_GT(good.Choose(cost, 1 << 20, 0).gamma, 0);
  EXPECT_EQ(bad.Choose(cost, 1 << 20, 0).gamma, 0);
  // The rows a scheduler reserved bound the choice.
  DraftLengthController bounded(req, env);
  for (int f = 0; f < 40; ++f) bounded.Observe({}, 0, std::vector<bool>(6, true));
  const int reserved = MaxDecodeRows(WithGamma(req.decoding, 3));
  const int chosen = bounded.Choose(cost, reserved, 0).gamma;
  EXPECT_GT(chosen, 0);
  EXPECT_LE(MaxDecodeRows(WithGamma(req.decoding, chosen)), reserved);
  // A step the cost calibration wants timed as AR runs as AR, and leaves the choice
  // after it as it was.
  DraftCost ar_wanted = cost;
  ar_wanted.ar_step_wanted = true;
  EXPECT_EQ(good.Choose(ar_wanted, 1 << 20, 0).gamma, 0);
  EXPECT_EQ(good.Choose(cost, 1 << 20, 0).gamma, good.Choose(cost, 1 << 20, 0).gamma);
  EXPECT_GT(good.Choose(cost, 1 << 20, 0).gamma, 0);
}

}  // namespace
}  // namespace crossreg
