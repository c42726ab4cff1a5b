#include "distill/distill_prefix_sampler.h"

#include <algorithm>
#include <functional>
#include <limits>

#include "absl/strings/str_cat.h"

namespace crossreg {

int64_t UniformInt(std::mt19937_64& rng, int64_t lo, int64_t hi) {
  static_assert(std::mt19937_64::min() == 0 && std::mt19937_64::max() == std::numeric_limits<uint64_t>::max());
  const uint64_t span = static_cast<uint64_t>(hi) - static_cast<uint64_t>(lo);  // hi - lo, as unsigned
  if (span == std::numeric_limits<uint64_t>::max()) return static_cast<int64_t>(rng());
  const uint64_t range = span + 1;
  // Values below `reject` would make the low residues more likely: draw again.
  const uint64_t reject = (std::numeric_limits<uint64_t>::max() - range + 1) % range;  // 2^64 mod range
  uint64_t x;
  do {
    x = rng();
  } while (x < reject);
  return static_cast<int64_t>(static_cast<uint64_t>(lo) + x % range);
}

absl::StatusOr<PrefixSample> SamplePrefixes(int64_t stream_length, int64_t count, int32_t prefix_min,
                                            int32_t prefix_max, uint64_t seed) {
  return SamplePrefixGroups(stream_length, count, 1, prefix_min, prefix_max, seed);
}

absl::StatusOr<PrefixSample> SamplePrefixGroups(int64_t stream_length, int64_t groups, int32_t per_group,
                                                int32_t prefix_min, int32_t prefix_max, uint64_t seed) {
  const int64_t count = groups;
  if (prefix_min < 1 || prefix_max < prefix_min) {
    return absl::InvalidArgumentError(
        absl::StrCat("prefix lengths [", prefix_min, ", ", prefix_max, "] are not a range of positive lengths"));
  }
  const int64_t longest = std::min<int64_t>(prefix_max, stream_length - 1);
  if (longest < prefix_min) {
    return absl::InvalidArgumentError(absl::StrCat("the stream has ", stream_length,
                                                   " tokens: too few for prefixes of ", prefix_min,
                                                   " tokens (it needs at least ", int64_t{prefix_min} + 1, ")"));
  }
  if (count < 0) return absl::InvalidArgumentError(absl::StrCat("a negative number of prefixes: ", count));
  if (per_group < 1) return absl::InvalidArgumentError(absl::StrCat("prefixes per group must be >= 1, got ", per_group));
  std::mt19937_64 rng(seed);
  PrefixSample sample;
  sample.start.reserve(static_cast<size_t>(count * per_group));
  sample.length.reserve(static_cast<size_t>(count * per_group));
  std::vector<int32_t> lengths(static_cast<size_t>(per_group));
  for (int64_t i = 0; i < count; ++i) {
    for (int32_t& length : lengths) length = static_cast<int32_t>(UniformInt(rng, prefix_min, longest));
    // Longest first: its prompt blocks, once computed, serve the shorter ones (prefix cache).
    std::sort(lengths.begin(), lengths.end(), std::greater<int32_t>());
    const int64_t start = UniformInt(rng, 0, stream_length - lengths.front());
    for (int32_t length : lengths) {
      sample.start.push_back(start);
      sample.length.push_back(length);
    }
  }
  return sample;
}

}  // namespace crossreg
