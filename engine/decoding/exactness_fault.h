// The test seam for planted exactness bugs: the statistical and identity tests must
// fail on each of these, which proves they can catch such a bug. Production code never
// sets one: Verify is the kNone instantiation of the verifier (verify.cc), where every
// fault test is a compile-time constant, and no request carries a fault. A test plants
// one for a scope (ScopedExactnessFault); every SequenceDecoder of the process then
// verifies with VerifyWithFault.
#pragma once

#include "engine/decoding/verify.h"

namespace crossreg {

enum class ExactnessFault {
  kNone,
  kVerifyCarriedDraftsWithCurrentQ,     // tests a carried draft against this forward's Q
  kPenaliseDraftsWithoutEarlierDrafts,  // judges d_k's penalties without d_1 .. d_{k-1}
  kMaskDraftsInTheCommittedState,       // masks P_k by the grammar state before d_1 .. d_{k-1}
  kBlockDraftsWithTheFirstRowsQ,        // outcome blocks: caches every draft with the block's first q
  // Draws every position of a forward with the number of its first position, as a
  // counter kept per forward rather than per position would: AR (one position a
  // forward) is unchanged, a forward that commits several tokens is not.
  kDrawWithTheForwardsCounter,
};

// Verify with `fault` planted (kNone: Verify itself).
VerifyOutcome VerifyWithFault(ExactnessFault fault, const StepPlan& plan, const LogitRows& logits, int vocab,
                              DraftBuffer drafts, const SamplingParams& sampling, EnergyAcceptor acceptor,
                              const RowRequests& requests = {});

// The fault planted for this process now (kNone unless a test holds a scope).
ExactnessFault PlantedExactnessFault();

// Plants `fault` until the scope ends (tests only; scopes do not nest).
class ScopedExactnessFault {
 public:
  explicit ScopedExactnessFault(ExactnessFault fault);
  ~ScopedExactnessFault();
  ScopedExactnessFault(const ScopedExactnessFault&) = delete;
  ScopedExactnessFault& operator=(const ScopedExactnessFault&) = delete;
};

}  // namespace crossreg
