// A seed fixes the text (docs/algorithm.md "Seed-exact verification"): seeded sampled
// requests (temperatures 0.7-1.2, top-p, top-k, min-p, penalties, a grammar) decode to
// AR's ids in n-gram and lossless mode (chain, forked with n-gram assist, outcome
// blocks; coupled and argmax drafts), with adaptive γ on or off and the prefix cache on
// or off, one sequence at a time (Generate) on stories260K with a random drafter. The
// n-gram drafts come from a table of AR's own text with every fourth continuation
// wrong, so that most forwards commit several tokens. The scheduler's side (batches of
// 16, preemption) is tests/scheduler/seed_identity_scheduler_test.cc; the server's
// (gRPC, HTTP) tests/integration/seed_identity_server_test.cc.
#include <cstdio>
#include <string>
#include <vector>

#include "engine/decoding/exactness_fault.h"
#include "engine/decoding/acceptance_memory.h"
#include "scheduler/generate.h"
#include "gtest/gtest.h"
#include "tests/testing/seeded_requests.h"
#include "tests/testing/tiny_models.h"

namespace crossreg {
namespace {

using testing::MakeEngine;
using testing::SeededSampledRequest;

// A CPU-like cost curve: adaptive γ' moves between AR and drafting as acceptance changes.
const ForwardCostCurve& SteepCurve() {
  static const ForwardCostCurve curve =
      *ForwardCostCurve::FromPoints({{1, 1e-3}, {2, 1.3e-3}, {16, 4e-3}, {64, 20e-3}});
  return curve;
}

// The exact speculative decodings request i runs besides AR: n-gram, lossless on a
// forked chain with n-gram assist, and lossless on outcome blocks or the plain chain;
// which of them adapt γ and which draft by argmax varies with i.
std::vector<DecodingConfig> ExactModes(int i) {
  DecodingConfig ngram;
  ngram.mode = DecodingMode::kNgram;
  ngram.gamma = 4;
  ngram.adaptive_gamma = i % 2 == 1;
  DecodingConfig forked;
  forked.mode = DecodingMode::kLossless;
  forked.gamma = 4;
  forked.fork_outcomes = 2;
  forked.fork_depth = 2;
  forked.ngram_assist = true;
  forked.adaptive_gamma = (i / 2) % 2 == 1;
  if (i % 4 == 3) forked.sampled_verification = SampledVerification::kSeedExactArgmax;
  DecodingConfig other;
  other.mode = DecodingMode::kLossless;
  other.gamma = 1 + i % 6;
  if (i % 2 == 0) {
    other.draft_layout = DraftLayout::kBlocks;
    other.fork_outcomes = i % 3 == 0 ? 0 : 1;
    other.fork_depth = 3;
  }
  other.adaptive_gamma = (i / 3) % 2 == 1;
  return {ngram, forked, other};
}

class SeedIdentityTest : public ::testing::Test {
 protected:
  void SetUp() override {
    m_ = testing::LoadSeedIdentityModel();
    ASSERT_NE(m_.model, nullptr);
    ASSERT_NE(m_.grammar, nullptr);
    plain_ = MakeEngine(*m_.model, m_.drafter.get(), 2048);
    cached_ = MakeEngine(*m_.model, m_.drafter.get(), 2048);
    KvCacheConfig caching = cached_.kv->config();
    caching.prefix_caching = true;
    cached_.kv = std::make_unique<PagedKvCache>(caching);
  }

  GenerationResult Run(testing::EngineUnderTest& e, GenerationRequest request, const DecodingConfig& decoding,
                       const NgramTable* table = nullptr, ExactnessFault fault = ExactnessFault::kNone) {
    request.decoding = decoding;
    const ScopedExactnessFault planted(fault);
    DecodingEnvironment env = e.env;
    env.cost_curve = &SteepCurve();
    env.ngram_table = table;
    env.acceptance_memory = &memory_;
    auto r = Generate(*e.backend, *e.kv, request, env);
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? *std::move(r) : GenerationResult{};
  }

  testing::SeedIdentityModel m_;
  testing::EngineUnderTest plain_, cached_;
  AcceptanceMemory memory_;  // shared by every request, as in the server
};

// 216 requests, each decoded in AR and three exact speculative ways; every second
// request's speculative runs read the prefix cache that earlier requests filled.
TEST_F(SeedIdentityTest, EveryExactModeWritesArsTextForTheSeed) {
  constexpr int kRequests = 216;
  int64_t drafted = 0, accepted = 0, multi_token_forwards = 0, cached_prompt = 0, compared = 0;
  for (int i = 0; i < kRequests; ++i) {
    const GenerationRequest request = SeededSampledRequest(m_, i);
    const GenerationResult ar = Run(plain_, request, DecodingConfig{});
    ASSERT_FALSE(ar.ids.empty());
    testing::EngineUnderTest& engine = i % 2 == 1 ? cached_ : plain_;
    std::vector<int32_t> text = request.prompt_ids;
    text.insert(text.end(), ar.ids.begin(), ar.ids.end());
    const auto table = testing::TableOfTexts({text}, m_.model->config.vocab_size, 4);
    const std::vector<DecodingConfig> modes = ExactModes(i);
    for (size_t k = 0; k < modes.size(); ++k) {
      const DecodingConfig& decoding = modes[k];
      // The n-gram and the assisted runs draft from AR's text; the third from the drafter alone.
      const GenerationResult spec = Run(engine, request, decoding, k < 2 ? table.get() : nullptr);
      ASSERT_EQ(spec.ids, ar.ids) << "request " << i << " (seed " << request.sampling.seed << ", T "
                                  << request.sampling.temperature << ") in " << DecodingModeName(decoding.mode)
                                  << " gamma " << decoding.gamma << (decoding.adaptive_gamma ? " adaptive" : "")
                                  << (decoding.blocks() ? " blocks" : "") << " "
                                  << SampledVerificationName(decoding.sampled_verification);
      drafted += spec.stats.drafted;
      accepted += spec.stats.accepted;
      multi_token_forwards += spec.stats.committed - spec.stats.forwards;
      cached_prompt += spec.cached_prompt_tokens;
      ++compared;
    }
  }
  std::printf("[seed identity] %d requests, %lld speculative runs equal to AR: %lld drafts, %lld accepted, "
              "%lld prompt tokens from the prefix cache\n",
              kRequests, static_cast<long long>(compared), static_cast<long long>(drafted),
              static_cast<long long>(accepted), static_cast<long long>(cached_prompt));
  // Not vacuous: forwards committed several tokens, and prompts were read from the cache.
  EXPECT_GT(accepted, drafted / 5);
  EXPECT_GT(multi_token_forwards, 2000);
  EXPECT_GT(cached_prompt, 1000);
  EXPECT_EQ(plain_.kv->Stats().used_blocks, 0);
}

// The identity check can fail: the planted fault (a forward's positions all drawn
// with its first position's number) and speculative sampling (AR's distribution, not
// its text) both change the texts, where the default does not.
TEST_F(SeedIdentityTest, TheIdentityCheckCatchesAFaultAndSpeculativeSampling) {
  int faulty_differ = 0, sampling_differ = 0;
  constexpr int kRequests = 16;
  for (int i = 0; i < kRequests; ++i) {
    const GenerationRequest request = SeededSampledRequest(m_, i);
    const GenerationResult ar = Run(plain_, request, DecodingConfig{});
    std::vector<int32_t> text = request.prompt_ids;
    text.insert(text.end(), ar.ids.begin(), ar.ids.end());
    const auto table = testing::TableOfTexts({text}, m_.model->config.vocab_size, 4);
    DecodingConfig assisted;
    assisted.mode = DecodingMode::kLossless;
    assisted.gamma = 4;
    assisted.ngram_assist = true;
    ASSERT_EQ(Run(plain_, request, assisted, table.get()).ids, ar.ids);
    faulty_differ +=
        Run(plain_, request, assisted, table.get(), ExactnessFault::kDrawWithTheForwardsCounter).ids != ar.ids;
    assisted.sampled_verification = SampledVerification::kSpeculativeSampling;
    sampling_differ += Run(plain_, request, assisted, table.get()).ids != ar.ids;
  }
  EXPECT_GE(faulty_differ, kRequests - 2) << "the planted fault went unnoticed";
  EXPECT_GE(sampling_differ, kRequests - 2);
}

}  // namespace
}  // namespace crossreg
