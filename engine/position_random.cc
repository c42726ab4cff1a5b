#include "engine/position_random.h"

namespace crossreg {

double PositionRandom::Uniform(int64_t position, RandomLane lane) const {
  const auto p = static_cast<uint64_t>(position);
  const PhiloxCounter out = Philox4x32_10(
      {static_cast<uint32_t>(p), static_cast<uint32_t>(p >> 32), static_cast<uint32_t>(lane), 0u}, key_);
  const uint64_t bits = (static_cast<uint64_t>(out[0]) << 32) | out[1];
  return static_cast<double>(bits >> 11) * 0x1.0p-53;
}

}  // namespace crossreg
