// The predictive stream's LoRA adapter on the device, in f32 (it is small: rank ×
// (in + out) per target) so the low-rank update keeps full precision.
#pragma once

#include <array>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/cuda/cuda_context.h"
#include "engine/cuda/device_buffer.h"
#include "engine/model/lora_adapter.h"

namespace crossreg::cuda {

struct DeviceLoraMatrix {
  int rank = 0;  // 0: target not adapted
  float scale = 0.0f;
  DeviceBuffer<float> a;  // (rank, in)
  DeviceBuffer<float> b;  // (out, rank)
};

struct DeviceLoraAdapter {
  std::vector<std::array<DeviceLoraMatrix, kNumLoraTargets>> layers;
  int max_rank = 0;
  const DeviceLoraMatrix& at(int layer, LoraTarget t) const {
    return layers[static_cast<size_t>(layer)][static_cast<size_t>(t)];
  }
};

absl::StatusOr<DeviceLoraAdapter> UploadLoraAdapter(const CudaContext& ctx, const LoraAdapter& adapter);

}  // namespace crossreg::cuda
