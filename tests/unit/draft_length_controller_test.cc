// DraftLengthController: adaptive n-gram keeps one acceptance estimate per match class
// (NgramMatchClass), so drafts from the context's repeats and from the corpus table's
// guesses of the same length are judged on their own record.
#include "engine/decoding/draft_length_controller.h"

#include <vector>

#include "engine/decoding/ngram_drafter.h"
#include "gtest/gtest.h"

namespace crossreg {
namespace {

TEST(DraftLengthControllerTest, ContextAndTableMatchesOfOneLengthLearnApart) {
  GenerationRequest req;
  req.prompt_ids = {1, 2, 3};
  req.max_new_tokens = 100;
  req.decoding.mode = DecodingMode::kNgram;
  req.decoding.gamma = 8;
  req.decoding.adaptive_gamma = true;
  const DecodingEnvironment env;  // no acceptance memory: the request learns alone
  DraftLengthController controller(req, env);
  const int context3 = NgramMatchClass(3, false, req.decoding.ngram_max);
  const int table3 = NgramMatchClass(3, true, req.decoding.ngram_max);
  ASSERT_NE(context3, table3);
  // The context's 3-token matches draft 8 tokens that are all accepted; the table's fail
  // at their first draft.
  for (int i = 0; i < 40; ++i) {
    controller.Observe(context3, std::vector<bool>(8, true));
    controller.Observe(table3, {false});
  }
  // Two CPU cores on a small model: rows cost about 25% of a one-row forward each.
  auto curve = ForwardCostCurve::FromPoints({{1, 1e-3}, {2, 1.25e-3}, {9, 3e-3}}, {{1, 1e-3}, {2, 1.25e-3}, {9, 3e-3}});
  ASSERT_TRUE(curve.ok()) << curve.status();
  const DraftCost cost{&*curve, 1, 1};
  EXPECT_GE(controller.Choose(cost, 64, context3), 4);
  EXPECT_EQ(controller.Choose(cost, 64, table3), 0);
  // No match: nothing to verify.
  EXPECT_EQ(controller.Choose(cost, 64, 0), 0);
}

}  // namespace
}  // namespace crossreg
