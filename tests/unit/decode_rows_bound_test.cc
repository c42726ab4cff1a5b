// What an adaptive sequence asks a scheduler to reserve (SequenceDecoder::DecodeRowsBound)
// and that its plans stay within it: a forked Cross-Regression request running AR
// reserves a probe's rows, not the full γ's, and drafts at full depth once drafts pay.
#include <memory>
#include <vector>

#include "engine/decoding/sequence_decoder.h"
#include "engine/forward_output.h"
#include "engine/model/random_model.h"
#include "gtest/gtest.h"
#include "tests/testing/tiny_models.h"

namespace crossreg {
namespace {

struct DecodeRun {
  std::vector<int> bounds;  // DecodeRowsBound before each decode forward
  std::vector<int> rows;    // that forward's rows
  std::vector<int> reach;   // the most rows its draft length could have taken
  std::vector<int> gammas;  // its γ' (0 = AR)
  std::vector<int32_t> tokens;
};

DecodeRun Decode(const GenerationRequest& req, const ForwardCostCurve& curve, float lora_magnitude = 0.5f) {
  auto model = MakeRandomModel(testing::TinyConfig(48), {DType::kF32, 5, 2.0f});
  auto adapter = testing::TinyAdapter(model->config, lora_magnitude, 15);
  testing::EngineUnderTest engine = testing::MakeEngine(*model, adapter.get());
  const SequenceId seq = engine.kv->CreateSequence();
  SequenceDecoder decoder(req, engine.env, seq);
  DecodeRun run;
  ForwardBatch batch;
  ForwardOutput out;
  const DraftCost cost{&curve, 1, 1, 0};
  while (!decoder.finished()) {
    const bool decode = !decoder.prefilling();
    const int bound = decoder.DecodeRowsBound(&curve);
    const StepPlan plan = decoder.Plan(decoder.Choose(&cost, bound), 64);
    if (decode) {
      run.bounds.push_back(bound);
      run.rows.push_back(static_cast<int>(plan.rows.size()));
      run.reach.push_back(MaxDecodeRows(plan.decoding));
      run.gammas.push_back(plan.decoding.mode == DecodingMode::kAutoregressive ? 0 : plan.decoding.gamma);
    }
    batch.rows = plan.rows;
    KvTransaction transaction(*engine.kv);
    EXPECT_TRUE(engine.backend->Execute(batch, transaction, out).ok());
    absl::StatusOr<StepOutcome> step = decoder.OnForward(plan, LogitRows(out.logits, out.summaries));
    if (!step.ok() || !transaction.Commit(decoder.sequence(), step->kv_length).ok()) {
      ADD_FAILURE() << "the forward's outcome could not be applied";
      break;
    }
  }
  run.tokens = decoder.tokens();
  engine.kv->Free(seq);
  return run;
}

GenerationRequest ForkedAdaptive(DecodingMode mode) {
  GenerationRequest req;
  req.prompt_ids = {3, 4, 5};
  req.max_new_tokens = 60;
  req.stop_at_eos = false;
  req.decoding.mode = mode;
  req.decoding.gamma = 8;
  if (mode != DecodingMode::kNgram) {
    req.decoding.fork_outcomes = 2;
    req.decoding.fork_depth = 3;
  }
  req.decoding.adaptive_gamma = true;
  return req;
}

TEST(DecodeRowsBoundTest, ArRunningForkedRequestReservesAProbeAndPlansStayWithinTheBound) {
  const GenerationRequest req = ForkedAdaptive(DecodingMode::kLossless);
  const int full = MaxDecodeRows(req.decoding);
  const int probe = MaxDecodeRows(WithGamma(req.decoding, 1));
  ASSERT_EQ(full, 27);  // (8 + 1) + (8 + 1 + 3) + 2 · 3
  ASSERT_EQ(probe, 6);
  // Drafts that fail on rows that cost little: the request runs AR between probes.
  auto cheap = ForwardCostCurve::FromPoints({{1, 1e-3}, {64, 4.15e-3}});
  ASSERT_TRUE(cheap.ok());
  const DecodeRun ar = Decode(req, *cheap, 6.0f);
  ASSERT_EQ(ar.bounds.size(), ar.rows.size());
  int probes = 0;
  for (size_t f = 0; f < ar.rows.size(); ++f) {
    EXPECT_LE(ar.rows[f], ar.bounds[f]) << "forward " << f;
    EXPECT_LE(ar.reach[f], ar.bounds[f]) << "forward " << f;
    EXPECT_EQ(ar.bounds[f], f == 0 || ar.gammas[f - 1] == 0 ? probe : full) << "forward " << f;
    probes += ar.gammas[f] > 0;
  }
  EXPECT_GT(probes, 0);  // probes fit the probe's reservation
  EXPECT_LT(probes * 4, static_cast<int>(ar.rows.size()));

  // Flat: drafts pay; after the first drafting forward the full γ is reserved and used.
  auto flat = ForwardCostCurve::FromPoints({{1, 1e-3}, {64, 1.001e-3}});
  ASSERT_TRUE(flat.ok());
  const DecodeRun xr = Decode(req, *flat);
  int deep = 0;
  for (size_t f = 0; f < xr.rows.size(); ++f) {
    EXPECT_LE(xr.rows[f], xr.bounds[f]) << "forward " << f;
    EXPECT_LE(xr.reach[f], xr.bounds[f]) << "forward " << f;
    deep += xr.rows[f] > probe;
  }
  EXPECT_GT(deep, static_cast<int>(xr.rows.size()) / 2);
  // The reservation changes the draft lengths, never the greedy output.
  EXPECT_EQ(ar.tokens, xr.tokens);
}

// Outcome blocks: (γ + 1) control rows plus one block of fork_depth rows per outcome
// with a block, and every plan within it.
TEST(DecodeRowsBoundTest, OutcomeBlockPlansStayWithinTheBound) {
  GenerationRequest req = ForkedAdaptive(DecodingMode::kLossless);
  req.decoding.draft_layout = DraftLayout::kBlocks;
  EXPECT_EQ(MaxDecodeRows(req.decoding), 18);  // (8 + 1) + 3 · 3: outcomes 0, 1 and m
  EXPECT_EQ(MaxDecodeRows(WithGamma(req.decoding, 1)), 2 + 2 * 1);
  req.decoding.fork_outcomes = 0;
  EXPECT_EQ(MaxDecodeRows(req.decoding), 36);  // (8 + 1) + 9 · 3: every outcome
  auto flat = ForwardCostCurve::FromPoints({{1, 1e-3}, {64, 1.001e-3}});
  ASSERT_TRUE(flat.ok());
  for (int outcomes : {0, 2}) {
    req.decoding.fork_outcomes = outcomes;
    const DecodeRun run = Decode(req, *flat);
    ASSERT_FALSE(run.rows.empty());
    for (size_t f = 0; f < run.rows.size(); ++f) {
      EXPECT_LE(run.rows[f], run.bounds[f]) << "forward " << f;
      EXPECT_LE(run.rows[f], MaxDecodeRows(req.decoding)) << "forward " << f;
    }
  }
}

TEST(DecodeRowsBoundTest, FixedGammaNgramAndNoCurveReserveTheFullBound) {
  auto curve = ForwardCostCurve::FromPoints({{1, 1e-3}, {2, 1e-1}, {64, 10.0}});
  ASSERT_TRUE(curve.ok());
  GenerationRequest fixed = ForkedAdaptive(DecodingMode::kLossless);
  fixed.decoding.adaptive_gamma = false;
  const GenerationRequest ngram = ForkedAdaptive(DecodingMode::kNgram);
  for (const GenerationRequest& req : {fixed, ngram}) {
    const DecodeRun run = Decode(req, *curve);
    ASSERT_FALSE(run.bounds.empty());
    for (int b : run.bounds) EXPECT_EQ(b, MaxDecodeRows(req.decoding));
  }
  auto model = MakeRandomModel(testing::TinyConfig(48), {DType::kF32, 5, 2.0f});
  testing::EngineUnderTest engine = testing::MakeEngine(*model, nullptr);
  const GenerationRequest adaptive = ForkedAdaptive(DecodingMode::kNgram);
  SequenceDecoder decoder(adaptive, engine.env, engine.kv->CreateSequence());
  EXPECT_EQ(decoder.DecodeRowsBound(nullptr), MaxDecodeRows(adaptive.decoding));
}

}  // namespace
}  // namespace crossreg
