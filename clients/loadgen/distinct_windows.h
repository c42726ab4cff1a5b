// Picking many different stretches of text out of one pool of token ids.
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"

namespace crossreg::clients {

// `count` windows of `length` consecutive ids of `pool`, all different, so that two
// prompts ending in different windows share no prefix-cache block past their common
// part. Offsets are taken in rotation from `first_offset` (wrapping around), and each
// window must begin differently from the ones taken before it: first with a new first
// id, then, once those run out, with a new first two ids, and so on, so the windows
// differ as early as the pool allows (a later-diverging pair could share a 16-token
// block). Real text keeps them readable. A pool that repeats itself (greedy decoding
// of a small model can loop) may hold fewer distinct windows than `count`: the rest
// are windows with their ids shuffled by a fixed seed, still distinct, still the
// model's vocabulary; `shuffled`, when given, is increased by how many. Deterministic.
// Fails only when the pool is shorter than `length` or too uniform to give `count`
// distinct windows (e.g. one id repeated).
absl::StatusOr<std::vector<std::vector<int32_t>>> DistinctWindows(const std::vector<int32_t>& pool, int length,
                                                                  int count, int first_offset, int* shuffled = nullptr);

}  // namespace crossreg::clients
