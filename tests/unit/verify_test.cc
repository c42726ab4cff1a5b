// Verify (engine/decoding/verify.h) on hand-made logits, one table row per rule of
// ALGORITHM.md "What breaks exactness". Each row states the property that rule
// guarantees and checks it on the outcome; where a broken implementation can be
// imitated through the inputs (a stale q, shifted rows, an unprocessed P), the row
// also runs that broken variant and requires the same check to fail, so the check is
// shown to catch the bug it names.
#include "engine/decoding/exactness_fault.h"
#include "engine/decoding/verify.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/testing/chi_square.h"

namespace crossreg {
namespace {

constexpr int kVocab = 8;
constexpr int64_t kCommitted = 10;  // L: committed tokens before the forward

// Logits whose softmax at T = 1 is `probs` (zeros become a negligible mass).
std::vector<float> LogitsOf(const std::vector<double>& probs) {
  std::vector<float> z(kVocab, -60.0f);
  for (size_t i = 0; i < probs.size(); ++i) {
    if (probs[i] > 0) z[i] = static_cast<float>(std::log(probs[i]));
  }
  return z;
}
std::vector<float> OneHotLogits(int token) {
  std::vector<double> p(kVocab, 0.0);
  p[static_cast<size_t>(token)] = 1.0;
  return LogitsOf(p);
}
// One-hot logits over a vocabulary of kBigVocab, for plans whose rows propose many tokens.
constexpr int kBigVocab = 32;
std::vector<float> WideOneHot(int token) {
  std::vector<float> z(kBigVocab, -60.0f);
  z[static_cast<size_t>(token)] = 0.0f;
  return z;
}
std::vector<float> Probs(const std::vector<double>& p) {
  std::vector<float> out(kVocab, 0.0f);
  for (size_t i = 0; i < p.size(); ++i) out[i] = static_cast<float>(p[i]);
  return out;
}

// A decode plan of a Cross-Regression forward: m drafts verified by control rows
// P_1..P_{m+1}, a main predictive chain of g rows, optional forks.
StepPlan XrPlan(int m, int g, DecodingMode mode = DecodingMode::kLossless, std::vector<int> forks = {}) {
  StepPlan plan;
  plan.kind = StepPlan::Kind::kDecode;
  plan.committed = kCommitted;
  plan.decoding.mode = mode;
  plan.decoding.gamma = g;
  plan.decoding.fork_outcomes = static_cast<int>(forks.size());
  plan.drafts = m;
  plan.main_chain = g;
  plan.fork_sizes = std::move(forks);
  return plan;
}

// The plan verifying by speculative sampling (min(1, P/q), then the residual): the
// rule whose handling of q these cases check; seed-exact verification reads no q.
StepPlan SpeculativeSampling(StepPlan plan) {
  plan.decoding.sampled_verification = SampledVerification::kSpeculativeSampling;
  return plan;
}

// Rows in plan order: control P_1..P_{m+1}, then predictive Q rows (main chain, forks).
struct Forward {
  std::vector<std::vector<float>> control;
  std::vector<std::vector<float>> predictive;
  std::vector<float> Flat() const {
    std::vector<float> out;
    for (const auto& r : control) out.insert(out.end(), r.begin(), r.end());
    for (const auto& r : predictive) out.insert(out.end(), r.begin(), r.end());
    return out;
  }
};

struct Case {
  std::string name;
  StepPlan plan;
  Forward forward;
  DraftBuffer drafts;
  SamplingParams sampling;
  int trials = 1;  // seeds 7919 × 1..trials (sampling cases draw with the seed's numbers)
  // The rule's property over every trial's outcome.
  std::function<bool(const std::vector<VerifyOutcome>&)> holds = nullptr;
  // Imitates the broken implementation through the inputs; the property must then
  // fail. Empty: the row's expectations are exact values a broken rule cannot meet.
  std::function<void(Case&)> break_rule = nullptr;
  ExactnessFault fault = ExactnessFault::kNone;  // a planted bug that must also fail it
};

std::vector<VerifyOutcome> RunCase(const Case& c, ExactnessFault fault = ExactnessFault::kNone) {
  std::vector<VerifyOutcome> out;
  const std::vector<float> logits = c.forward.Flat();
  for (int t = 1; t <= c.trials; ++t) {
    SamplingParams sampling = c.sampling;
    sampling.seed = static_cast<uint64_t>(t) * 7919;
    out.push_back(VerifyWithFault(fault, c.plan, logits, kVocab, c.drafts, sampling,
                                  EnergyAcceptor(c.plan.decoding.beta, c.plan.decoding.tau, c.plan.decoding.gamma)));
  }
  return out;
}

int CountAccepted(const std::vector<VerifyOutcome>& outs, int n) {
  int count = 0;
  for (const auto& o : outs) count += o.accepted == n ? 1 : 0;
  return count;
}

std::vector<Case> ExactnessCases() {
  std::vector<Case> cases;
  SamplingParams t1;
  t1.temperature = 1.0f;

  {
    // Rule: a carried draft is verified against the q it was drawn from (cached with
    // it), never against this forward's Q at its slot. P_2(d_2) = q_2(d_2): with the
    // cached q it is always accepted; this forward's Q puts 0.9 on d_2, which would
    // reject it most of the time.
    Case c{"carried draft uses its cached q", SpeculativeSampling(XrPlan(2, 3)), {}, {}, t1, 200};
    c.forward.control = {OneHotLogits(3), LogitsOf({0.2, 0.0, 0.8}), LogitsOf({0.5, 0.5})};
    c.forward.predictive = {LogitsOf({0.1, 0.1, 0.1, 0.7}), LogitsOf({0.9, 0.1}), LogitsOf({0.5, 0.5})};
    c.drafts = {Draft{3, Probs({0, 0, 0, 1}), false}, Draft{0, Probs({0.2, 0.0, 0.8}), true}};
    c.holds = [](const auto& outs) { return CountAccepted(outs, 2) == static_cast<int>(outs.size()); };
    c.break_rule = [](Case& k) { k.drafts[1].q = Probs({0.9, 0.1}); };  // q swapped for the current Q
    c.fault = ExactnessFault::kVerifyCarriedDraftsWithCurrentQ;
    cases.push_back(std::move(c));
  }
  {
    // Rule: the residual of a rejected draft is normalize(max(0, P − q)) with the q the
    // draft was drawn from. P_1 = [.5, .5], q = one-hot at 0: d_1 = 0 is accepted half
    // the time, and when rejected the correction must be token 1 (never the rejected
    // 0). Built from this forward's Q row ([0, 1]) the residual would be [.5, 0].
    Case c{"residual from the draft's own q", SpeculativeSampling(XrPlan(1, 2)), {}, {}, t1, 400};
    c.forward.control = {LogitsOf({0.5, 0.5}), LogitsOf({0.25, 0.25, 0.25, 0.25})};
    c.forward.predictive = {LogitsOf({0.0, 1.0}), LogitsOf({0.5, 0.5})};
    c.drafts = {Draft{0, Probs({1.0}), true}};
    c.holds = [](const auto& outs) {
      int rejected = 0;
      for (const auto& o : outs) {
        if (o.accepted == 1) continue;
        ++rejected;
        if (o.tokens.size() != 1 || o.tokens[0] != 1) return false;
      }
      // min(1, p/q) = 0.5: both branches happen (400 trials: 5 sigma is ±50).
      return rejected > 130 && rejected < 270;
    };
    c.fault = ExactnessFault::kVerifyCarriedDraftsWithCurrentQ;  // residual (and test) from the current Q
    cases.push_back(std::move(c));
  }
  {
    // Rule: d_k is tested against P_k, the control row whose input prefix is x, d_<k
    // (row k-1 of the plan), and the correction comes from the same row. Greedy:
    // rows 0, 1 agree with d_1, d_2; row 2 prefers 6 over d_3 = 4; so n = 2 and the
    // correction is 6. Read one row late (the prefix including d_k), the verdicts and
    // the correction change.
    Case c{"P_k from the row whose prefix is x, d_<k", XrPlan(3, 4), {}, {}, SamplingParams{}, 1};
    c.forward.control = {OneHotLogits(2), OneHotLogits(5), OneHotLogits(6), OneHotLogits(7)};
    c.forward.predictive = {OneHotLogits(1), OneHotLogits(1), OneHotLogits(1), OneHotLogits(3)};
    c.drafts = {Draft{2, {}, false}, Draft{5, {}, false}, Draft{4, {}, false}};
    c.holds = [](const auto& outs) {
      const auto& o = outs.front();
      return o.accepted == 2 && o.tokens == std::vector<int32_t>{2, 5, 6} &&
             o.verdicts == std::vector<bool>{true, true, false};
    };
    c.break_rule = [](Case& k) {  // the control rows shifted by one position
      std::rotate(k.forward.control.begin(), k.forward.control.begin() + 1, k.forward.control.end());
    };
    cases.push_back(std::move(c));
  }
  {
    // Rule: P is processed exactly as the AR path processes it (temperature, top-k,
    // top-p). With top_k = 1 at T = 1 the AR distribution is one-hot at the argmax
    // (token 1), so a one-hot draft of token 0 (raw P 0.4) can never be accepted and
    // the correction is always 1. Verified against the raw softmax it would be
    // accepted 40% of the time.
    SamplingParams top1 = t1;
    top1.top_k = 1;
    Case c{"top-k applied to P as in AR", XrPlan(1, 2), {}, {}, top1, 200};
    c.forward.control = {LogitsOf({0.4, 0.6}), LogitsOf({0.5, 0.5})};
    c.forward.predictive = {LogitsOf({0.5, 0.5}), LogitsOf({0.5, 0.5})};
    c.drafts = {Draft{0, {}, false}};
    c.holds = [](const auto& outs) {
      for (const auto& o : outs) {
        if (o.accepted != 0 || o.tokens != std::vector<int32_t>{1}) return false;
      }
      return true;
    };
    c.break_rule = [](Case& k) { k.sampling.top_k = 0; };  // P left unprocessed
    cases.push_back(std::move(c));
  }
  {
    // Rule: top-p too. top_p = 0.5 keeps only token 1 (mass 0.6), so draft 0 is
    // always rejected.
    SamplingParams nucleus = t1;
    nucleus.top_p = 0.5f;
    Case c{"top-p applied to P as in AR", XrPlan(1, 2), {}, {}, nucleus, 200};
    c.forward.control = {LogitsOf({0.4, 0.6}), LogitsOf({0.5, 0.5})};
    c.forward.predictive = {LogitsOf({0.5, 0.5}), LogitsOf({0.5, 0.5})};
    c.drafts = {Draft{0, {}, false}};
    c.holds = [](const auto& outs) {
      for (const auto& o : outs) {
        if (o.accepted != 0 || o.tokens != std::vector<int32_t>{1}) return false;
      }
      return true;
    };
    c.break_rule = [](Case& k) { k.sampling.top_p = 1.0f; };
    cases.push_back(std::move(c));
  }
  return cases;
}

class VerifyRuleTest : public ::testing::TestWithParam<size_t> {};

TEST_P(VerifyRuleTest, HoldsAndItsCheckCatchesTheBrokenVariant) {
  const Case c = ExactnessCases()[GetParam()];
  SCOPED_TRACE(c.name);
  EXPECT_TRUE(c.holds(RunCase(c))) << "the rule does not hold";
  if (c.break_rule) {
    Case broken = c;
    c.break_rule(broken);
    EXPECT_FALSE(broken.holds(RunCase(broken))) << "the check does not catch the broken variant";
  }
  if (c.fault != ExactnessFault::kNone) {
    EXPECT_FALSE(c.holds(RunCase(c, c.fault))) << "the check does not catch the planted fault";
  }
}

INSTANTIATE_TEST_SUITE_P(ExactnessRules, VerifyRuleTest, ::testing::Range<size_t>(0, ExactnessCases().size()),
                         [](const ::testing::TestParamInfo<size_t>& info) {
                           const std::string title = ExactnessCases()[info.param].name;
                           std::string name;  // "top-k applied to P" -> "TopKAppliedToP"
                           bool word_start = true;
                           for (char ch : title) {
                             const bool alnum = std::isalnum(static_cast<unsigned char>(ch));
                             if (alnum) name += word_start ? static_cast<char>(std::toupper(ch)) : ch;
                             word_start = !alnum;
                           }
                           return name;
                         });

// Rule: the cache keeps the K/V of x_last and the accepted drafts, nothing else
// (kv_keep = L + n), and exactly n + 1 tokens are committed, for every n.
TEST(VerifyTest, KvKeepsXLastAndTheAcceptedDraftsForEveryOutcome) {
  const std::vector<int32_t> drafts = {2, 5, 4};
  for (int n = 0; n <= 3; ++n) {
    SCOPED_TRACE(n);
    Forward f;
    for (int k = 0; k < 3; ++k) f.control.push_back(OneHotLogits(k < n ? drafts[static_cast<size_t>(k)] : 7));
    f.control.push_back(OneHotLogits(6));  // P_4: the bonus when all three pass
    for (int k = 0; k < 4; ++k) f.predictive.push_back(OneHotLogits(1));
    DraftBuffer buffer;
    for (int32_t d : drafts) buffer.push_back(Draft{d, {}, false});
    const VerifyOutcome o = Verify(XrPlan(3, 4), f.Flat(), kVocab, buffer, SamplingParams{}, EnergyAcceptor(0, 0, 4));
    EXPECT_EQ(o.accepted, n);
    EXPECT_EQ(o.kv_keep, kCommitted + n);
    std::vector<int32_t> expected(drafts.begin(), drafts.begin() + n);
    expected.push_back(n == 3 ? 6 : 7);  // bonus from P_4, or the correction argmax P_{n+1}
    EXPECT_EQ(o.tokens, expected);
    EXPECT_EQ(o.verdicts.size(), static_cast<size_t>(std::min(n + 1, 3)));
  }
}

// Rule: which slots carry and which refill depends on n and m only, never on token
// values. ALGORITHM.md's refill with m = 3, γ = 4: old slot j+c becomes slot j; the
// untested drafts d_{c+1}..d_m carry with their q, then slots whose old slot is <= γ
// take this forward's Q at that old slot. Q rows are one-hot at 10+s (s = old slot),
// so each proposal names the row it came from; some equal a draft's value on purpose.
TEST(VerifyTest, RefillTakesSlotsByPositionOnly) {
  const std::vector<int32_t> drafts = {2, 5, 4};
  for (int n = 0; n <= 3; ++n) {
    SCOPED_TRACE(n);
    std::vector<float> logits;
    for (int k = 0; k < 3; ++k) {
      const auto row = WideOneHot(k < n ? drafts[static_cast<size_t>(k)] : 7);
      logits.insert(logits.end(), row.begin(), row.end());
    }
    const auto bonus = WideOneHot(6);
    logits.insert(logits.end(), bonus.begin(), bonus.end());
    for (int s = 1; s <= 4; ++s) {  // Q_s one-hot at 10+s, but Q_4 proposes 5, a draft's own value
      const auto row = WideOneHot(s == 4 ? 5 : 10 + s);
      logits.insert(logits.end(), row.begin(), row.end());
    }
    DraftBuffer buffer;
    for (int32_t d : drafts) buffer.push_back(Draft{d, {}, false});
    const VerifyOutcome o =
        Verify(XrPlan(3, 4), logits, kBigVocab, buffer, SamplingParams{}, EnergyAcceptor(0, 0, 4));
    const int c = n + 1;
    std::vector<int32_t> expected;
    for (int s = c + 1; s <= 3; ++s) expected.push_back(drafts[static_cast<size_t>(s - 1)]);  // carried
    for (int s = std::max(3, c) + 1; s <= 4; ++s) expected.push_back(s == 4 ? 5 : 10 + s);     // fresh from Q_s
    std::vector<int32_t> got;
    for (const Draft& d : o.next_drafts) got.push_back(d.token);
    EXPECT_EQ(got, expected);
    for (size_t i = 0; i < o.next_drafts.size(); ++i) {
      EXPECT_EQ(o.next_drafts[i].carried, static_cast<int>(i) < 3 - c) << i;
    }
  }
}

// Forked refill: the outcome n picks its own chain: n = m takes the main chain's
// placeholder tail, n < R the fork anchored after d_n; other outcomes fall back to the
// carry-and-refill rule. Plan: m = 2, main chain g = 5 (tail rows 3, 4), forks of 2
// rows for n = 0 and n = 1. Every row proposes a distinct token naming it.
TEST(VerifyTest, ForkedRefillTakesTheChainOfTheOutcome) {
  const std::vector<int32_t> drafts = {2, 5};
  const std::vector<std::vector<int32_t>> expected = {{20, 21}, {22, 23}, {13, 14}};  // n = 0, 1, 2
  for (int n = 0; n <= 2; ++n) {
    SCOPED_TRACE(n);
    std::vector<float> logits;
    for (int k = 0; k < 2; ++k) {
      const auto row = WideOneHot(k < n ? drafts[static_cast<size_t>(k)] : 7);
      logits.insert(logits.end(), row.begin(), row.end());
    }
    const auto bonus = WideOneHot(6);
    logits.insert(logits.end(), bonus.begin(), bonus.end());
    for (int k = 0; k < 5; ++k) {  // main chain rows propose 10 + k
      const auto row = WideOneHot(10 + k);
      logits.insert(logits.end(), row.begin(), row.end());
    }
    for (int j = 0; j < 4; ++j) {  // fork rows (2 per fork) propose 20 + j
      const auto row = WideOneHot(20 + j);
      logits.insert(logits.end(), row.begin(), row.end());
    }
    DraftBuffer buffer;
    for (int32_t d : drafts) buffer.push_back(Draft{d, {}, false});
    const StepPlan plan = XrPlan(2, 5, DecodingMode::kLossless, {2, 2});
    const VerifyOutcome o = Verify(plan, logits, kBigVocab, buffer, SamplingParams{}, EnergyAcceptor(0, 0, 5));
    ASSERT_EQ(o.accepted, n);
    std::vector<int32_t> got;
    for (const Draft& d : o.next_drafts) got.push_back(d.token);
    EXPECT_EQ(got, expected[static_cast<size_t>(n)]);
  }
}

// Outcome blocks: the block of the outcome that happened proposes the buffer; an
// outcome without a block (size 0) carries its untested drafts with their q.
TEST(VerifyTest, OutcomeBlocksRefillFromTheBlockOfTheOutcome) {
  const std::vector<int32_t> drafts = {2, 5, 9};
  // Blocks of 2 rows for outcomes 0 and 3 (= m), none for 1 and 2: block rows propose
  // 20, 21 (outcome 0) and 26, 27 (outcome 3).
  const std::vector<int> sizes = {2, 0, 0, 2};
  const std::vector<std::vector<int32_t>> expected = {{20, 21}, {9}, {}, {26, 27}};  // n = 0 .. 3
  for (int n = 0; n <= 3; ++n) {
    SCOPED_TRACE(n);
    std::vector<float> logits;
    for (int k = 0; k < 3; ++k) {
      const auto row = WideOneHot(k < n ? drafts[static_cast<size_t>(k)] : 7);
      logits.insert(logits.end(), row.begin(), row.end());
    }
    const auto bonus = WideOneHot(6);
    logits.insert(logits.end(), bonus.begin(), bonus.end());
    for (int32_t t : {20, 21, 26, 27}) {
      const auto row = WideOneHot(t);
      logits.insert(logits.end(), row.begin(), row.end());
    }
    DraftBuffer buffer;
    for (int32_t d : drafts) buffer.push_back(Draft{d, {}, false});
    StepPlan plan = XrPlan(3, 0, DecodingMode::kLossless, sizes);
    plan.decoding.draft_layout = DraftLayout::kBlocks;
    plan.decoding.fork_outcomes = 1;
    const VerifyOutcome o = Verify(plan, logits, kBigVocab, buffer, SamplingParams{}, EnergyAcceptor(0, 0, 3));
    ASSERT_EQ(o.accepted, n);
    EXPECT_EQ(o.tokens.back(), n == 3 ? 6 : 7);
    EXPECT_EQ(o.kv_keep, plan.committed + n);
    std::vector<int32_t> got;
    for (const Draft& d : o.next_drafts) got.push_back(d.token);
    EXPECT_EQ(got, expected[static_cast<size_t>(n)]);
    for (const Draft& d : o.next_drafts) EXPECT_EQ(d.carried, n == 1);
  }
}

// Greedy lossy: β = 0, τ = 0 is exact match; τ < 0 accepts a non-argmax draft whose
// logit margin is within the bar; energies use the untempered logits.
TEST(VerifyTest, GreedyLossyReducesToExactMatchAndTauLowersTheBar) {
  Forward f;
  std::vector<float> close(kVocab, -5.0f);
  close[1] = 0.0f;
  close[2] = -0.3f;  // the draft: 0.3 nats below the argmax
  f.control = {close, OneHotLogits(6)};
  f.predictive = {OneHotLogits(1), OneHotLogits(1)};
  const DraftBuffer drafts = {Draft{2, {}, false}};
  for (const auto& [tau, accepted] : std::vector<std::pair<float, int>>{{0.0f, 0}, {-0.1f, 0}, {-1.0f, 1}}) {
    SCOPED_TRACE(tau);
    StepPlan plan = XrPlan(1, 2, DecodingMode::kLossy);
    plan.decoding.tau = tau;
    const VerifyOutcome o = Verify(plan, f.Flat(), kVocab, drafts, SamplingParams{}, EnergyAcceptor(0, tau, 2));
    EXPECT_EQ(o.accepted, accepted);
    EXPECT_EQ(o.tokens.front(), accepted ? 2 : 1);
  }
}

// The first committed token of a sampled Cross-Regression step verified by speculative
// sampling is distributed as P (its guarantee), whatever q the draft came from:
// chi-square over 20,000 steps. The same harness fails with the planted stale-q fault.
TEST(VerifyTest, FirstCommittedTokenIsDistributedAsP) {
  const std::vector<double> p = {0.30, 0.05, 0.25, 0.10, 0.15, 0.05, 0.06, 0.04};
  const std::vector<double> q = {0.05, 0.40, 0.05, 0.20, 0.05, 0.15, 0.05, 0.05};
  const std::vector<double> q_now = {0.70, 0.05, 0.05, 0.05, 0.05, 0.05, 0.03, 0.02};
  Forward f;
  f.control = {LogitsOf(p), LogitsOf(p)};
  f.predictive = {LogitsOf(q_now), LogitsOf(q_now)};
  const std::vector<float> logits = f.Flat();
  SamplingParams t1;
  t1.temperature = 1.0f;
  auto run = [&](ExactnessFault fault) {
    std::vector<int64_t> counts(kVocab, 0);
    const PositionRandom draw(12345);  // the drafts' own numbers
    for (int i = 0; i < 20000; ++i) {
      // The draft is drawn from q, as the predictive stream would have drawn it.
      const std::vector<float> qf = Probs(q);
      const int32_t d = DrawToken(qf.data(), kVocab, draw, i, RandomLane::kToken);
      t1.seed = static_cast<uint64_t>(i) * 2654435761u + 1;
      const VerifyOutcome o = VerifyWithFault(fault, SpeculativeSampling(XrPlan(1, 2)), logits, kVocab,
                                              {Draft{d, qf, true}}, t1, EnergyAcceptor(0, 0, 2));
      ++counts[static_cast<size_t>(o.tokens.front())];
    }
    return testing::ChiSquareTest(counts, p);
  };
  const auto exact = run(ExactnessFault::kNone);
  EXPECT_GT(exact.p_value, 1e-3) << "chi2 " << exact.statistic;
  EXPECT_LT(exact.total_variation, 0.02);
  const auto faulty = run(ExactnessFault::kVerifyCarriedDraftsWithCurrentQ);
  EXPECT_LT(faulty.p_value, 1e-6) << "the planted fault went unnoticed: TV " << faulty.total_variation;
}

}  // namespace
}  // namespace crossreg
