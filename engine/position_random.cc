#include "engine/position_random.h"

namespace crossreg {

PhiloxCounter PositionRandom::Block(int64_t position, RandomLane lane, uint32_t index) const {
  const auto p = static_cast<uint64_t>(position);
  return Philox4x32_10({static_cast<uint32_t>(p), static_cast<uint32_t>(p >> 32), static_cast<uint32_t>(lane), index},
                       key_);
}

double PositionRandom::Uniform(int64_t position, RandomLane lane) const {
  const PhiloxCounter out = Block(position, lane, 0);
  const uint64_t bits = (static_cast<uint64_t>(out[0]) << 32) | out[1];
  return static_cast<double>(bits >> 11) * 0x1.0p-53;
}

}  // namespace crossreg
