// Seed-exact verification (docs/algorithm.md) at the level of Verify, on hand-made
// distributions: whatever is drafted, in whatever numbers per forward, the committed
// tokens are the ones AR draws for the seed, position by position. A drafter whose q
// equals P has every coupled draft accepted (its draws take the numbers of the
// positions they will be verified at). The identity check is shown to catch a planted
// fault (numbers from a per-forward counter) and speculative sampling (distributed as
// AR, but another text).
#include <algorithm>
#include <cstdint>
#include <vector>

#include "engine/decoding/exactness_fault.h"
#include "engine/decoding/verify.h"
#include "gtest/gtest.h"

namespace crossreg {
namespace {

constexpr int kVocab = 12;
constexpr int32_t kPlaceholder = kVocab - 1;
constexpr int kPromptLength = 3;

// The model: logits of the next token as a fixed function of every token before it,
// through a hash of the sequence. `drafter` > 0 perturbs them into the drafter's Q.
std::vector<float> NextLogits(const std::vector<int32_t>& sequence, double drafter = 0.0) {
  uint64_t h = 1469598103934665603ull;
  for (int32_t t : sequence) h = (h ^ static_cast<uint64_t>(t + 1)) * 1099511628211ull;
  Rng rng(h);
  Rng noise(h ^ 0x5bd1e995ull);
  std::vector<float> z(kVocab);
  for (float& v : z) {
    v = static_cast<float>(4.0 * rng.Uniform() - 2.0 + drafter * (noise.Uniform() - 0.5));
  }
  z[kPlaceholder] = -30.0f;  // never generated
  return z;
}

SamplingParams Sampled(uint64_t seed, int variant) {
  SamplingParams s;
  s.temperature = variant % 3 == 0 ? 0.7f : variant % 3 == 1 ? 1.0f : 1.2f;
  s.top_p = variant % 2 == 0 ? 0.9f : 1.0f;
  s.top_k = variant % 5 == 4 ? 6 : 0;
  s.seed = seed;
  return s;
}

StepPlan DecodePlan(DecodingMode mode, const std::vector<int32_t>& sequence, int drafts, int main_chain) {
  StepPlan plan;
  plan.kind = StepPlan::Kind::kDecode;
  plan.decoding.mode = mode;
  plan.decoding.gamma = std::max(1, main_chain);
  plan.committed = static_cast<int64_t>(sequence.size());
  plan.generated = plan.committed - kPromptLength;
  plan.drafts = drafts;
  plan.main_chain = main_chain;
  return plan;
}

void Append(std::vector<float>& rows, const std::vector<float>& row) { rows.insert(rows.end(), row.begin(), row.end()); }

// AR: one forward per token, each drawing P_1 with the seed's number for its position.
std::vector<int32_t> ArTokens(const std::vector<int32_t>& prompt, const SamplingParams& sampling, int length) {
  std::vector<int32_t> sequence = prompt;
  while (static_cast<int>(sequence.size()) < kPromptLength + length) {
    const StepPlan plan = DecodePlan(DecodingMode::kAutoregressive, sequence, 0, 0);
    const VerifyOutcome o = Verify(plan, NextLogits(sequence), kVocab, {}, sampling, EnergyAcceptor(0, 0, 1));
    sequence.push_back(o.tokens.at(0));
  }
  return {sequence.begin() + kPromptLength, sequence.end()};
}

// One-hot drafts, as n-gram and grammar-forced drafting propose them: a random number
// per forward (0 .. 5), each AR's own token or, one time in three, another.
std::vector<int32_t> OneHotDraftTokens(const std::vector<int32_t>& prompt, const SamplingParams& sampling, int length,
                                       const std::vector<int32_t>& ar, uint64_t trial, ExactnessFault fault) {
  Rng choices(trial);
  std::vector<int32_t> sequence = prompt;
  while (static_cast<int>(sequence.size()) < kPromptLength + length) {
    const int generated = static_cast<int>(sequence.size()) - kPromptLength;
    const int m = std::min<int>(static_cast<int>(choices.Next() % 6), length - generated - 1);
    DraftBuffer drafts;
    std::vector<int32_t> context = sequence;
    std::vector<float> rows;
    for (int k = 0; k < m; ++k) {
      Append(rows, NextLogits(context));
      const bool right = choices.Next() % 3 != 0;
      const int32_t d = right ? ar[static_cast<size_t>(generated + k)] : static_cast<int32_t>(choices.Next() % kVocab);
      drafts.push_back(Draft{d, {}, false});
      context.push_back(d);
    }
    Append(rows, NextLogits(context));
    const StepPlan plan = DecodePlan(DecodingMode::kNgram, sequence, m, 0);
    const VerifyOutcome o = VerifyWithFault(fault, plan, rows, kVocab, drafts, sampling, EnergyAcceptor(0, 0, 5));
    for (int32_t t : o.tokens) sequence.push_back(t);
  }
  sequence.resize(static_cast<size_t>(kPromptLength + length));
  return {sequence.begin() + kPromptLength, sequence.end()};
}

// Cross-Regression on ALGORITHM.md's chain: the buffer carries and refills through
// Verify, drafts drawn from a perturbed Q of the rows that held them.
std::vector<int32_t> ChainDraftTokens(const std::vector<int32_t>& prompt, const SamplingParams& sampling, int length,
                                      int gamma, SampledVerification rule, double drafter, int64_t* accepted) {
  std::vector<int32_t> sequence = prompt;
  DraftBuffer buffer;
  while (static_cast<int>(sequence.size()) < kPromptLength + length) {
    const int generated = static_cast<int>(sequence.size()) - kPromptLength;
    const int m = std::min<int>({static_cast<int>(buffer.size()), gamma - 1, length - generated - 1});
    buffer.resize(static_cast<size_t>(m));
    const int g = std::min(gamma, length - generated);
    StepPlan plan = DecodePlan(DecodingMode::kLossless, sequence, m, g);
    plan.decoding.sampled_verification = rule;
    std::vector<float> rows;
    std::vector<int32_t> context = sequence;
    for (int k = 0; k <= m; ++k) {
      Append(rows, NextLogits(context));
      if (k < m) context.push_back(buffer[static_cast<size_t>(k)].token);
    }
    context = sequence;
    for (int s = 1; s <= g; ++s) {  // Q_s reads [x_last, d_1 .. d_{s-1}], placeholders past m
      Append(rows, NextLogits(context, drafter));
      context.push_back(s <= m ? buffer[static_cast<size_t>(s - 1)].token : kPlaceholder);
    }
    const VerifyOutcome o = Verify(plan, rows, kVocab, buffer, sampling, EnergyAcceptor(0, 0, gamma));
    *accepted += o.accepted;
    for (int32_t t : o.tokens) sequence.push_back(t);
    buffer = o.next_drafts;
  }
  sequence.resize(static_cast<size_t>(kPromptLength + length));
  return {sequence.begin() + kPromptLength, sequence.end()};
}

constexpr int kLength = 24;
constexpr int kSeeds = 300;

TEST(SeedExactVerifyTest, OneHotDraftsCommitArsTokens) {
  int64_t differing = 0;
  for (int i = 0; i < kSeeds; ++i) {
    const SamplingParams sampling = Sampled(1000 + static_cast<uint64_t>(i), i);
    const std::vector<int32_t> prompt = {i % 7, (i * 5) % 11, 3};
    const std::vector<int32_t> ar = ArTokens(prompt, sampling, kLength);
    ASSERT_EQ(OneHotDraftTokens(prompt, sampling, kLength, ar, static_cast<uint64_t>(i), ExactnessFault::kNone), ar)
        << "seed " << sampling.seed;
    const std::vector<int32_t> faulty =
        OneHotDraftTokens(prompt, sampling, kLength, ar, static_cast<uint64_t>(i), ExactnessFault::kDrawWithTheForwardsCounter);
    differing += faulty != ar ? 1 : 0;
  }
  // The same check catches the planted fault: numbers from a counter per forward.
  EXPECT_GT(differing, kSeeds / 2) << "the planted fault went unnoticed";
}

TEST(SeedExactVerifyTest, DrafterDraftsCommitArsTokensUnderEitherSeedExactRule) {
  for (const SampledVerification rule : {SampledVerification::kSeedExact, SampledVerification::kSeedExactArgmax}) {
    int64_t accepted = 0;
    for (int i = 0; i < kSeeds; ++i) {
      const SamplingParams sampling = Sampled(5000 + static_cast<uint64_t>(i), i);
      const std::vector<int32_t> prompt = {(i * 3) % 11, i % 5, 8};
      const std::vector<int32_t> ar = ArTokens(prompt, sampling, kLength);
      ASSERT_EQ(ChainDraftTokens(prompt, sampling, kLength, 1 + i % 6, rule, 1.5, &accepted), ar)
          << SampledVerificationName(rule) << " seed " << sampling.seed;
    }
    EXPECT_GT(accepted, kSeeds) << SampledVerificationName(rule);  // drafts did pass, several forwards per request
  }
}

// Speculative sampling keeps AR's distribution, not its text: the identity check
// tells the two apart.
TEST(SeedExactVerifyTest, TheIdentityCheckTellsSpeculativeSamplingApart) {
  int differing = 0;
  int64_t accepted = 0;
  for (int i = 0; i < 100; ++i) {
    const SamplingParams sampling = Sampled(9000 + static_cast<uint64_t>(i), i);
    const std::vector<int32_t> prompt = {i % 11, 2, 7};
    const std::vector<int32_t> ar = ArTokens(prompt, sampling, kLength);
    differing += ChainDraftTokens(prompt, sampling, kLength, 4, SampledVerification::kSpeculativeSampling, 1.5,
                                  &accepted) != ar;
  }
  EXPECT_GT(differing, 50);
}

// Coupling: a refill's draft takes the number of the output position it will be
// verified at. Q_2 and Q_3 of a forward that commits one token propose for the next
// two positions; when the next forward's P_1 and P_2 are those same distributions, a
// coupled draw from Q is the target's draw from P, and every draft passes. The most
// likely token passes only as often as it is drawn.
TEST(SeedExactVerifyTest, CoupledDraftsFromAQEqualToPAreAlwaysAccepted) {
  int coupled_accepted = 0, argmax_accepted = 0, trials = 0;
  for (int i = 0; i < 400; ++i) {
    const SamplingParams sampling = Sampled(20000 + static_cast<uint64_t>(i), i);
    const std::vector<float> first = NextLogits({i, 1});
    const std::vector<float> second = NextLogits({i, 2});
    const std::vector<float> third = NextLogits({i, 3});
    for (const SampledVerification rule : {SampledVerification::kSeedExact, SampledVerification::kSeedExactArgmax}) {
      std::vector<int32_t> sequence = {1, 2, 3, 4, 5};  // 2 generated after the prompt
      StepPlan plan = DecodePlan(DecodingMode::kLossless, sequence, 0, 3);
      plan.decoding.sampled_verification = rule;
      std::vector<float> rows;
      Append(rows, first);   // P_1
      Append(rows, first);   // Q_1 (unused: its slot is the committed token)
      Append(rows, second);  // Q_2: the next forward's P_1
      Append(rows, third);   // Q_3: the next forward's P_2
      const VerifyOutcome o = Verify(plan, rows, kVocab, {}, sampling, EnergyAcceptor(0, 0, 3));
      ASSERT_EQ(o.next_drafts.size(), 2u);
      sequence.push_back(o.tokens.at(0));
      StepPlan next = DecodePlan(DecodingMode::kLossless, sequence, 2, 3);
      next.decoding.sampled_verification = rule;
      std::vector<float> next_rows;
      for (const auto& row : {second, third, first, first, first, first}) Append(next_rows, row);
      const VerifyOutcome v = Verify(next, next_rows, kVocab, o.next_drafts, sampling, EnergyAcceptor(0, 0, 3));
      (rule == SampledVerification::kSeedExact ? coupled_accepted : argmax_accepted) += v.accepted;
    }
    trials += 2;
  }
  EXPECT_EQ(coupled_accepted, trials);
  EXPECT_LT(argmax_accepted, trials * 9 / 10);
}

}  // namespace
}  // namespace crossreg
