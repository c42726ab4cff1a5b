// DraftLengthController: adaptive n-gram keeps one acceptance estimate per match class
// (NgramMatchClass), so drafts from the context's repeats and from the corpus table's
// guesses of the same length are judged on their own record.
#include "engine/decoding/draft_length_controller.h"

#include <string>
#include <vector>

#include "engine/decoding/acceptance_memory.h"
#include "engine/decoding/ngram_drafter.h"
#include "gtest/gtest.h"

namespace crossreg {
namespace {

GenerationRequest AdaptiveRequest(DecodingMode mode, int gamma) {
  GenerationRequest req;
  req.prompt_ids = {1, 2, 3};
  req.max_new_tokens = 1000;
  req.decoding.mode = mode;
  req.decoding.gamma = gamma;
  req.decoding.adaptive_gamma = true;
  return req;
}

TEST(DraftLengthControllerTest, ContextAndTableMatchesOfOneLengthLearnApart) {
  const GenerationRequest req = AdaptiveRequest(DecodingMode::kNgram, 8);
  const DecodingEnvironment env;  // no acceptance memory: the request learns alone
  DraftLengthController controller(req, env);
  const int context3 = NgramMatchClass(3, false, req.decoding.ngram_max);
  const int table3 = NgramMatchClass(3, true, req.decoding.ngram_max);
  ASSERT_NE(context3, table3);
  // The context's 3-token matches draft 8 tokens that are all accepted; the table's fail
  // at their first draft.
  for (int i = 0; i < 40; ++i) {
    controller.Observe({}, context3, std::vector<bool>(8, true));
    controller.Observe({}, table3, {false});
  }
  // Two CPU cores on a small model: rows cost about 25% of a one-row forward each.
  auto curve = ForwardCostCurve::FromPoints({{1, 1e-3}, {2, 1.25e-3}, {9, 3e-3}}, {{1, 1e-3}, {2, 1.25e-3}, {9, 3e-3}});
  ASSERT_TRUE(curve.ok()) << curve.status();
  const DraftCost cost{&*curve, 1, 1};
  EXPECT_GE(controller.Choose(cost, 64, context3).gamma, 4);
  EXPECT_EQ(controller.Choose(cost, 64, table3).gamma, 0);
  // No match: nothing to verify.
  EXPECT_EQ(controller.Choose(cost, 64, 0).gamma, 0);
}

// Two CPU cores on a small model: rows cost about 25% of a one-row forward each.
ForwardCostCurve CpuCurve() {
  return *ForwardCostCurve::FromPoints({{1, 1e-3}, {2, 1.25e-3}, {9, 3e-3}}, {{1, 1e-3}, {2, 1.25e-3}, {9, 3e-3}});
}

GenerationRequest AdaptiveLossless() { return AdaptiveRequest(DecodingMode::kLossless, 4); }

TEST(DraftLengthControllerTest, ChooseChangesNothingAndObserveAppliesTheDecision) {
  const DecodingEnvironment env;  // learning alone
  DraftLengthController controller(AdaptiveLossless(), env);
  for (int i = 0; i < 40; ++i) controller.Observe({}, 0, {false});  // first drafts always fail
  const ForwardCostCurve curve = CpuCurve();
  const DraftCost cost{&curve, 1, 1};
  // Asked again and again without a forward, the answer stays: no probe schedule moves.
  const DraftDecision first = controller.Choose(cost, 64, 0);
  EXPECT_EQ(first.kind, DraftDecision::Kind::kAr);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(controller.Choose(cost, 64, 0).kind, DraftDecision::Kind::kAr);
  // Applied, the AR forwards count toward a probe; the probe's drafts are verified by the
  // next forward, and then the sequence is back in AR.
  int ar_forwards = 0;
  DraftDecision d = first;
  while (d.kind == DraftDecision::Kind::kAr && ar_forwards < 1000) {
    controller.Observe(d, 0, {});
    ++ar_forwards;
    d = controller.Choose(cost, 64, 0);
  }
  ASSERT_EQ(d.kind, DraftDecision::Kind::kProbe);
  EXPECT_EQ(ar_forwards + 1, first.first_interval);
  EXPECT_GT(d.gamma, 0);
  EXPECT_EQ(controller.Choose(cost, 64, 0).kind, DraftDecision::Kind::kProbe);  // still only a decision
  controller.Observe(d, 0, {});
  const DraftDecision verify = controller.Choose(cost, 64, 0);
  EXPECT_EQ(verify.kind, DraftDecision::Kind::kProbeVerify);
  controller.Observe(verify, 0, {false});
  EXPECT_EQ(controller.Choose(cost, 64, 0).kind, DraftDecision::Kind::kAr);
}

TEST(DraftLengthControllerTest, AClassProbesOnceAStep) {
  AcceptanceMemory memory;
  DecodingEnvironment env;
  env.acceptance_memory = &memory;
  const GenerationRequest req = AdaptiveLossless();
  const std::string cls = AcceptanceClassKey(req);
  for (int i = 0; i < 40; ++i) memory.Record(cls, 0, {false});  // the class's drafts fail
  std::vector<DraftLengthController> batch;
  for (int i = 0; i < 4; ++i) batch.emplace_back(req, env);
  const ForwardCostCurve curve = CpuCurve();
  // Steps of four sequences: count the probes each step plans.
  int probes = 0, steps_with_a_probe = 0;
  for (int step = 0; step < 200; ++step) {
    std::vector<std::string> step_probes;
    DraftCost cost{&curve, 4, 4};
    cost.step_probes = &step_probes;
    std::vector<DraftDecision> decisions;
    int here = 0;
    for (DraftLengthController& c : batch) {
      decisions.push_back(c.Choose(cost, 64, 0));
      here += decisions.back().kind == DraftDecision::Kind::kProbe ? 1 : 0;
    }
    EXPECT_LE(here, 1) << "step " << step;
    probes += here;
    steps_with_a_probe += here > 0 ? 1 : 0;
    for (size_t i = 0; i < batch.size(); ++i) {
      const bool verifies = decisions[i].kind == DraftDecision::Kind::kProbeVerify;
      batch[i].Observe(decisions[i], 0, verifies ? std::vector<bool>{false} : std::vector<bool>{});
    }
  }
  EXPECT_GE(probes, 2);  // the class's schedule fires, backing off
  EXPECT_EQ(probes, steps_with_a_probe);
}

}  // namespace
}  // namespace crossreg
