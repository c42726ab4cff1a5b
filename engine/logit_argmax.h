// The argmax of one row of logits, as greedy decoding and verification read it: the
// index a sequential scan `if (x[i] > x[best]) best = i` from best = 0 returns (the
// lowest index of the largest non-NaN value; 0 when x[0] is NaN), vectorised where the
// CPU allows and bitwise the scan's on every path. Decoding depends on this contract,
// not on the CPU backend's kernels (engine/cpu/), which implement it.
#pragma once

#include <cstdint>

namespace crossreg {

int32_t LogitArgmax(const float* x, int64_t n);

}  // namespace crossreg
