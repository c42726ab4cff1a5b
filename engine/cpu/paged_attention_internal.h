// The AVX-512 attention kernel behind engine/cpu/paged_attention.h.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/cpu/paged_attention.h"

namespace crossreg::cpu::internal {

// One (row, head) when head_dim is one the kernel is built for (a multiple of 8 up to
// 256); false otherwise (the portable path then runs). Call only with AVX-512.
bool AttendOneAvx512(const PagedAttentionArgs& a, int64_t r, int h, std::vector<float>& scores);

}  // namespace crossreg::cpu::internal
