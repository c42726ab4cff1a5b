#include "engine/logit_argmax.h"

#include "engine/cpu/cpu_features.h"
#include "engine/cpu/ops.h"

namespace crossreg {

int32_t LogitArgmax(const float* x, int64_t n) {
  static const cpu::SimdLevel level = cpu::DetectedSimdLevel();
  if (level >= cpu::SimdLevel::kAvx512) return cpu::internal::ArgmaxAvx512(x, n);
  if (level >= cpu::SimdLevel::kAvx2) return cpu::internal::ArgmaxAvx2(x, n);
  return cpu::internal::ArgmaxScalar(x, n);
}

}  // namespace crossreg
