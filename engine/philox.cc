#include "engine/philox.h"

namespace crossreg {
namespace {

// The round multipliers and the Weyl key increments of Philox-4x32 (the paper's
// constants; the increments are the golden ratio and sqrt(3) - 1 in 32-bit fixed point).
constexpr uint32_t kMultiplier0 = 0xD2511F53u;
constexpr uint32_t kMultiplier1 = 0xCD9E8D57u;
constexpr uint32_t kKeyIncrement0 = 0x9E3779B9u;
constexpr uint32_t kKeyIncrement1 = 0xBB67AE85u;

PhiloxCounter Round(const PhiloxCounter& x, const PhiloxKey& key) {
  const uint64_t product0 = static_cast<uint64_t>(kMultiplier0) * x[0];
  const uint64_t product1 = static_cast<uint64_t>(kMultiplier1) * x[2];
  const auto hi = [](uint64_t p) { return static_cast<uint32_t>(p >> 32); };
  const auto lo = [](uint64_t p) { return static_cast<uint32_t>(p); };
  return {hi(product1) ^ x[1] ^ key[0], lo(product1), hi(product0) ^ x[3] ^ key[1], lo(product0)};
}

}  // namespace

PhiloxCounter Philox4x32_10(PhiloxCounter counter, PhiloxKey key) {
  for (int round = 0; round < 10; ++round) {
    if (round > 0) {
      key[0] += kKeyIncrement0;
      key[1] += kKeyIncrement1;
    }
    counter = Round(counter, key);
  }
  return counter;
}

}  // namespace crossreg
