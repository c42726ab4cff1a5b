// Random prefixes of a token stream for crossreg-distill-data: the base model
// continues each one. Draws come from std::mt19937_64 (its output is fixed by the C++
// standard) through UniformInt below, not std::uniform_int_distribution (whose output
// differs between standard libraries), so a seed gives the same prefixes everywhere.
#pragma once

#include <cstdint>
#include <random>
#include <vector>

#include "absl/status/statusor.h"

namespace crossreg {

// Uniform in [lo, hi] (lo <= hi), unbiased (rejection of the top partial range).
int64_t UniformInt(std::mt19937_64& rng, int64_t lo, int64_t hi);

// Example i's prefix is stream[start[i] : start[i] + length[i]].
struct PrefixSample {
  std::vector<int64_t> start;
  std::vector<int32_t> length;
};

// `count` prefixes of a stream of `stream_length` tokens, each drawn as
//   length ~ U[prefix_min, min(prefix_max, stream_length - 1)],  start ~ U[0, stream_length - length]
// from std::mt19937_64(seed). Fails when the stream is too short for prefix_min
// (stream_length - 1 < prefix_min) or prefix_max < prefix_min.
absl::StatusOr<PrefixSample> SamplePrefixes(int64_t stream_length, int64_t count, int32_t prefix_min,
                                            int32_t prefix_max, uint64_t seed);

// `groups` runs of `per_group` prefixes of one text each (nested prefixes: one start,
// per_group lengths, longest first), for training windows that share a prefix forward:
//   lengths ~ U[prefix_min, min(prefix_max, stream_length - 1)] each,
//   start ~ U[0, stream_length - longest of the group].
// per_group 1 draws exactly what SamplePrefixes draws.
absl::StatusOr<PrefixSample> SamplePrefixGroups(int64_t stream_length, int64_t groups, int32_t per_group,
                                                int32_t prefix_min, int32_t prefix_max, uint64_t seed);

}  // namespace crossreg
