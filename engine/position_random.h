// A sampled request's random numbers: each a function of (seed, output position,
// lane) alone, through Philox4x32-10 keyed by the seed. A stream consumed in order
// would give the same position a different number in AR (one draw per forward) and in
// a speculative mode (drafts, verdicts, corrections, whatever γ and the load chose);
// a number fixed by the position is the same in every mode, so verifying a draft by
// the target's own draw at its position (docs/algorithm.md "Seed-exact verification")
// commits the token AR commits there.
#pragma once

#include <cstdint>

#include "engine/philox.h"

namespace crossreg {

// What a position's numbers are for: one lane each, so that no two purposes ever read
// the same number (a counter word of its own, not an offset into the positions).
enum class RandomLane : uint32_t {
  kToken = 0,       // the position's draw from P: AR's token, seed-exact verification, the bonus;
                    // also the drafter's coupled draw from q for that position (DrawToken)
  kAcceptance = 1,  // speculative sampling and lossy energy acceptance: U_k (Uniform)
  kResidual = 2,    // their draw from the residual after a rejection (DrawToken)
};

class PositionRandom {
 public:
  explicit PositionRandom(uint64_t seed)
      : key_{static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32)} {}
  // Uniform in [0, 1), 53 random bits, for output `position` (0: the request's first
  // generated token; the prompt does not count).
  double Uniform(int64_t position, RandomLane lane) const;
  // Block `index` of the position's lane: four 32-bit numbers, as many blocks as a draw
  // needs (a draw reads a token's number, engine/sampler.h). Uniform reads block 0; a
  // lane is read either way, never both.
  PhiloxCounter Block(int64_t position, RandomLane lane, uint32_t index) const;

 private:
  PhiloxKey key_;
};

}  // namespace crossreg
