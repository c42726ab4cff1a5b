// Sampling: the processed next-token distribution P (temperature, top-k, top-p) and
// the draw of a token from it with a request's numbers for a position. Speculative
// decoding verifies against exactly this P and draws with exactly this rule, so AR and
// every exact mode share one definition (the numbers: engine/position_random.h).
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "engine/position_random.h"

namespace crossreg {

struct SamplingParams {
  float temperature = 0.0f;  // 0: greedy (argmax)
  int top_k = 0;             // 0: no top-k cut
  float top_p = 1.0f;        // 1: no nucleus cut
  float min_p = 0.0f;        // 0: no cut; else drop tokens below min_p x the top token's probability
  // Same seed, same output, in AR and every exact mode (docs/algorithm.md "Seed-exact
  // verification"). The server draws one for a request that gives none.
  uint64_t seed = 0;
  bool greedy() const { return temperature == 0.0f; }
  // Ranges: temperature >= 0 and finite, top_k >= 0, 0 < top_p <= 1, 0 <= min_p <= 1. The message
  // starts with the field ("sampling.top_p: ...").
  absl::Status Validate() const;
};

// xoshiro256** seeded through splitmix64: fast, and the same on every platform
// (std:: distributions are implementation-defined). For random weights and tests; a
// request's sampling reads engine/position_random.h, whose numbers do not depend on
// how many were drawn before.
class Rng {
 public:
  explicit Rng(uint64_t seed);
  uint64_t Next();
  double Uniform();  // [0, 1), 53 random bits

 private:
  uint64_t s_[4];
};

// Lowest index among the maxima (NaN never wins; a NaN at 0 gives 0): the portable scan.
// Greedy verification uses LogitArgmax, the same index vectorised (engine/logit_argmax.h);
// this stays portable for the parsers' fuzz build, which has no engine/cpu.
int32_t Argmax(const float* logits, int vocab);

// probs (resized to vocab) = P: one-hot argmax when greedy; otherwise
// softmax(logits / T) restricted to the top-k, then to the tokens whose probability
// is at least min_p times the most probable one's, then to the smallest set of most
// probable tokens whose mass reaches top_p (ties broken by lower id), renormalised.
void ProcessedDistribution(const float* logits, int vocab, const SamplingParams& params,
                           std::vector<float>& probs);
// The same P by sorting every candidate id best first: the definition the faster paths of
// ProcessedDistribution are tested against (top-p alone finds its nucleus without sorting
// the vocabulary, and falls back to this).
void ProcessedDistributionBySorting(const float* logits, int vocab, const SamplingParams& params,
                                    std::vector<float>& probs);

// The token drawn from `probs` for output `position` of a request, with the numbers of
// `lane` (engine/position_random.h): the one draw rule of AR, of seed-exact verification,
// of the drafter's coupled proposals and of speculative sampling's residual.
//
// An exponential race (Gumbel-max sampling): every token has a number u_i of its own and
// the winner maximises log(u_i) / p_i, so token i wins with probability p_i. Two
// distributions raced with the same numbers pick the same token with probability at
// least (1 − TV) / (1 + TV), TV their total variation distance, whatever their order of
// likelihood: that is the coupling seed-exact drafts rely on (an inverse CDF over a fixed
// order agrees less: wherever two tokens swap ranks, or the mass before a token shifts,
// the same u names different tokens). The race runs in two rounds, so that a draw costs
// one pass over the vocabulary and a few hundred numbers rather than one per token:
// groups of kDrawGroup consecutive ids race with their masses, then the winning group's
// tokens with theirs (a group wins with its mass and a token within it with its share,
// so the winner's law is P's). A function of the probabilities' values and the numbers:
// equal vectors give equal draws. Never returns a zero-probability token (0 when there
// is none).
inline constexpr int kDrawGroup = 64;
int32_t DrawToken(const float* probs, int vocab, const PositionRandom& random, int64_t position, RandomLane lane);

}  // namespace crossreg
