#include "engine/cuda/device_lora.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "engine/cuda/cuda_status.h"
#include "engine/cuda/kernels.h"

namespace crossreg::cuda {
namespace {
absl::Status Upload(const std::vector<float>& host, DeviceBuffer<float>& dst) {
  if (absl::Status s = dst.Allocate(host.size()); !s.ok()) return s;
  if (host.empty()) return absl::OkStatus();
  CROSSREG_CUDA_RETURN_IF_ERROR(
      cudaMemcpy(dst.data(), host.data(), host.size() * sizeof(float), cudaMemcpyHostToDevice), "cudaMemcpy (LoRA)");
  return absl::OkStatus();
}
}  // namespace

absl::StatusOr<DeviceLoraAdapter> UploadLoraAdapter(const CudaContext& ctx, const LoraAdapter& adapter) {
  if (absl::Status s = ctx.Activate(); !s.ok()) return s;
  DeviceLoraAdapter d;
  d.layers.resize(adapter.layers.size());
  for (size_t l = 0; l < adapter.layers.size(); ++l) {
    for (int t = 0; t < kNumLoraTargets; ++t) {
      const LoraMatrix& src = adapter.layers[l].targets[static_cast<size_t>(t)];
      DeviceLoraMatrix& dst = d.layers[l][static_cast<size_t>(t)];
      if (!src.present()) continue;
      // The LoRA kernels stage three targets' ranks of a row in shared memory.
      if (src.rank * kMaxLoraTargetsPerGroup > kMaxLoraGroupRank) {
        return absl::InvalidArgumentError(absl::StrCat("CUDA backend: LoRA rank ", src.rank, " is above the ",
                                                       kMaxLoraGroupRank / kMaxLoraTargetsPerGroup,
                                                       " its kernels support"));
      }
      dst.rank = src.rank;
      dst.scale = src.scale;
      d.max_rank = std::max(d.max_rank, src.rank);
      if (absl::Status s = Upload(src.a, dst.a); !s.ok()) return s;
      if (absl::Status s = Upload(src.b, dst.b); !s.ok()) return s;
    }
  }
  CROSSREG_CUDA_RETURN_IF_ERROR(cudaDeviceSynchronize(), "cudaDeviceSynchronize (LoRA upload)");
  return d;
}

}  // namespace crossreg::cuda
