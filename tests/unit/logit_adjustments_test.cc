// Penalties, biases, min_p and log-probabilities on hand-made rows: each adjustment's
// semantics, their validation by field, and Verify judging a draft in the context of
// the drafts before it (and the planted fault that forgets them).
#include <cmath>
#include <vector>

#include "absl/strings/match.h"
#include "engine/decoding/exactness_fault.h"
#include "engine/decoding/logit_adjustments.h"
#include "engine/decoding/token_logprobs.h"
#include "engine/decoding/verify.h"
#include "engine/sampler.h"
#include "gtest/gtest.h"

namespace crossreg {
namespace {

TEST(LogitAdjustmentsTest, PresenceAndFrequencyReadTheGeneratedTokensOnly) {
  LogitAdjustments a;
  a.presence_penalty = 0.5f;
  a.frequency_penalty = 0.25f;
  const TokenHistory history({1, 1, 2}, {2, 3, 3, 3});
  std::vector<float> z = {1, 1, 1, 1, 1};
  history.Apply(a, z.data(), 5);
  EXPECT_FLOAT_EQ(z[0], 1.0f);
  EXPECT_FLOAT_EQ(z[1], 1.0f) << "prompt tokens are not penalised by presence or frequency";
  EXPECT_FLOAT_EQ(z[2], 1.0f - 0.5f - 0.25f);
  EXPECT_FLOAT_EQ(z[3], 1.0f - 0.5f - 0.75f);
  EXPECT_FLOAT_EQ(z[4], 1.0f);
}

TEST(LogitAdjustmentsTest, RepetitionDividesPositiveAndMultipliesNegativeLogitsOfSeenTokens) {
  LogitAdjustments a;
  a.repetition_penalty = 2.0f;
  const TokenHistory history({0}, {1});
  std::vector<float> z = {4, -4, 4};
  history.Apply(a, z.data(), 3);
  EXPECT_FLOAT_EQ(z[0], 2.0f);
  EXPECT_FLOAT_EQ(z[1], -8.0f);
  EXPECT_FLOAT_EQ(z[2], 4.0f) << "unseen";
}

TEST(LogitAdjustmentsTest, BiasIsAddedAndPushPopRestoresTheHistory) {
  LogitAdjustments a;
  a.logit_bias = {{2, -100.0f}, {0, 3.0f}};
  a.presence_penalty = 1.0f;
  TokenHistory history({}, {});
  history.PushGenerated(1);
  history.PushGenerated(1);
  history.PopGenerated(1);
  EXPECT_EQ(history.generated_count(1), 1);
  history.PopGenerated(1);
  EXPECT_FALSE(history.seen(1));
  std::vector<float> z = {0, 0, 0};
  history.Apply(a, z.data(), 3);
  EXPECT_EQ(z, (std::vector<float>{3, 0, -100}));
}

TEST(LogitAdjustmentsTest, OutOfRangeValuesAreRefusedByField) {
  struct Case {
    LogitAdjustments a;
    const char* field;
  };
  std::vector<Case> cases(5);
  cases[0].a.presence_penalty = 2.5f, cases[0].field = "sampling.presence_penalty";
  cases[1].a.frequency_penalty = NAN, cases[1].field = "sampling.frequency_penalty";
  cases[2].a.repetition_penalty = 0.0f, cases[2].field = "sampling.repetition_penalty";
  cases[3].a.logit_bias = {{7, 1.0f}}, cases[3].field = "sampling.logit_bias[7]";
  cases[4].a.logit_bias = {{1, 1.0f}, {2, 101.0f}}, cases[4].field = "sampling.logit_bias[2]";
  for (const Case& c : cases) {
    const absl::Status s = c.a.Validate(5);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << c.field;
    EXPECT_TRUE(absl::StartsWith(s.message(), c.field)) << s.message();
  }
  EXPECT_TRUE(LogitAdjustments{}.Validate(5).ok());
  EXPECT_FALSE(LogitAdjustments{}.active());
}

TEST(MinPTest, TokensBelowMinPTimesTheTopAreCut) {
  const std::vector<float> z = {std::log(0.5f), std::log(0.3f), std::log(0.15f), std::log(0.05f)};
  SamplingParams s;
  s.temperature = 1.0f;
  s.min_p = 0.2f;  // keeps p >= 0.1
  std::vector<float> p;
  ProcessedDistribution(z.data(), 4, s, p);
  EXPECT_NEAR(p[0], 0.5 / 0.95, 1e-6);
  EXPECT_NEAR(p[2], 0.15 / 0.95, 1e-6);
  EXPECT_EQ(p[3], 0.0f);
  s.min_p = 1.0f;  // only the top token
  ProcessedDistribution(z.data(), 4, s, p);
  EXPECT_EQ(p[0], 1.0f);
  s.min_p = 1.5f;
  EXPECT_EQ(s.Validate().code(), absl::StatusCode::kInvalidArgument);
}

TEST(TokenLogprobsTest, LogSoftmaxWithTheTopKSortedAndTiesToTheLowerId) {
  const std::vector<float> z = {1, 3, 3, 0};
  const TokenLogprob lp = LogprobFromLogits(z.data(), 4, 3, 3);
  const double log_z = std::log(std::exp(1.0) + 2 * std::exp(3.0) + 1.0);
  EXPECT_NEAR(lp.logprob, 0.0 - log_z, 1e-6);
  ASSERT_EQ(lp.top.size(), 3u);
  EXPECT_EQ(lp.top[0].first, 1);
  EXPECT_EQ(lp.top[1].first, 2);
  EXPECT_EQ(lp.top[2].first, 0);
  EXPECT_NEAR(lp.top[0].second, 3.0 - log_z, 1e-6);
  const std::vector<float> probs = {0.5f, 0.5f, 0.0f};
  const TokenLogprob cut = LogprobFromProbs(probs.data(), 3, 2, 0);
  EXPECT_TRUE(std::isinf(cut.logprob) && cut.logprob < 0);
  EXPECT_TRUE(cut.top.empty());
}

// Verify with a presence penalty of 2: both control rows favour token 3 (by 1). d_1 = 3 is
// judged with nothing generated and accepted; d_2 = 3 is judged after d_1 = 3, as if it
// had been committed, so P_2 is penalised and its argmax becomes 4: d_2 is rejected and
// 4 committed. The planted fault judges d_2 without d_1 and accepts it.
TEST(VerifyWithPenaltiesTest, ADraftIsJudgedAfterTheDraftsBeforeIt) {
  constexpr int kV = 6;
  auto row = [](int best, int second) {
    std::vector<float> z(kV, 0.0f);
    z[static_cast<size_t>(best)] = 5.0f;
    z[static_cast<size_t>(second)] = 4.0f;
    return z;
  };
  std::vector<float> logits;
  for (const auto& r : {row(3, 4), row(3, 4), row(3, 1)}) logits.insert(logits.end(), r.begin(), r.end());
  StepPlan plan;
  plan.kind = StepPlan::Kind::kDecode;
  plan.committed = 4;
  plan.decoding.mode = DecodingMode::kNgram;
  plan.decoding.gamma = 2;
  plan.drafts = 2;
  LogitAdjustments adjust;
  adjust.presence_penalty = 2.0f;
  for (const bool faulty : {false, true}) {
    SCOPED_TRACE(faulty ? "planted fault" : "exact");
    TokenHistory history({0, 1}, {});
    const RowRequests requests{.adjust = &adjust, .history = &history, .logprobs = 1};
    const VerifyOutcome o = VerifyWithFault(
        faulty ? ExactnessFault::kPenaliseDraftsWithoutEarlierDrafts : ExactnessFault::kNone, plan, LogitRows(logits),
        kV, {Draft{3, {}, false}, Draft{3, {}, false}}, SamplingParams{}, EnergyAcceptor(0, 0, 2), requests);
    if (!faulty) {
      EXPECT_EQ(o.tokens, (std::vector<int32_t>{3, 4}));
    } else {
      EXPECT_EQ(o.tokens, (std::vector<int32_t>{3, 3, 3}));
    }
    EXPECT_FALSE(history.seen(3)) << "Verify leaves the history as it came";
    ASSERT_EQ(o.logprobs.size(), o.tokens.size());
    // Raw log-probabilities: the model's rows before the penalty.
    EXPECT_NEAR(o.logprobs[0].logprob, LogprobFromLogits(logits.data(), kV, 3, 0).logprob, 1e-6);
    EXPECT_EQ(o.logprobs[0].top.size(), 1u);
    EXPECT_EQ(o.logprobs[0].top[0].first, 3);
  }
}

}  // namespace
}  // namespace crossreg
