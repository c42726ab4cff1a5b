// The AVX-512 attention kernel behind engine/cpu/paged_attention.h.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/cpu/paged_attention.h"

namespace crossreg::cpu::internal {

// One (row, head) when head_dim is one the kernel is built for (a multiple of 8 up to
// 256); false otherwise (the portable path then runs). Call only with AVX-512.
bool AttendOneAvx512(const PagedAttentionArgs& a, int64_t r, int h, std::vector<float>& scores);

// Rows in lanes: `count` (1..16) consecutive control rows of one sequence, row r0 + i
// attending cached positions [0, num_cached[r0] + i) (a verify step or a prefill chunk),
// or one row of any kind (count 1, its predictive group's rows included). Per attended
// position one FMA per head element covers every row of the group, which beats per-row
// dot products when heads are small. Each lane's arithmetic is the same whatever the
// other lanes hold (masked positions add exact zeros), so a row's result does not
// depend on its group: when head_dim <= kGroupMaxHeadDim every row goes through here.
// False when head_dim exceeds kGroupMaxHeadDim or count is out of range. AVX-512 only.
inline constexpr int kGroupMaxHeadDim = 32;
bool AttendGroupAvx512(const PagedAttentionArgs& a, int64_t r0, int count, int h, std::vector<float>& scratch);

}  // namespace crossreg::cpu::internal
