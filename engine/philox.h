// Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3", SC'11):
// a counter-based generator. Its output is a pure function of a 128-bit counter and a
// 64-bit key, so a number can be computed for any counter without generating the ones
// before it; that is what lets a sampled request's randomness depend on the position
// it is used at rather than on how many numbers were consumed first.
#pragma once

#include <array>
#include <cstdint>

namespace crossreg {

using PhiloxCounter = std::array<uint32_t, 4>;
using PhiloxKey = std::array<uint32_t, 2>;

// Ten rounds of the Philox-4x32 bijection of `counter` under `key`.
PhiloxCounter Philox4x32_10(PhiloxCounter counter, PhiloxKey key);

}  // namespace crossreg
