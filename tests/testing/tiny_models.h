// Small random models and adapters shared by the decoding tests.
#pragma once

#include <cstdint>
#include <memory>

#include "engine/cpu/cpu_backend.h"
#include "engine/decoding/generation_request.h"
#include "engine/model/lora_adapter.h"
#include "engine/model/model_config.h"
#include "engine/model/model_loader.h"

namespace crossreg::testing {

// GQA (6 heads over 2 KV heads), 2 layers, the given vocabulary and context.
ModelConfig TinyConfig(int vocab, int max_position = 256);

// A backend plus the cache it writes, sized for `tokens` positions in 4-token blocks,
// and what requests may do on it (adapter present, its placeholder, no cost curve).
struct EngineUnderTest {
  std::unique_ptr<Backend> backend;
  std::unique_ptr<PagedKvCache> kv;
  DecodingEnvironment env;
};
// How the CPU backend runs: one thread and blocks of 4 unless a test asks otherwise.
struct EngineThreading {
  int threads = 1;      // tiny shapes: a second thread only adds synchronisation
  int block_size = 4;   // 16: the keys-in-lanes attention's vector path
  bool row_split = true;  // a forward's rows split between the threads (small models)
};
EngineUnderTest MakeEngine(const Model& model, const LoraAdapter* adapter, int tokens = 1024,
                           cpu::SimdLevel simd = cpu::SimdLevel::kAvx512Bf16, KvDtype kv_dtype = KvDtype::kF32,
                           EngineThreading threading = {});

// A random drafter adapter for `config` whose placeholder is the vocabulary's last id:
// `magnitude` 0.5 drafts mostly right on the tiny models, a large one mostly wrong.
std::unique_ptr<LoraAdapter> TinyAdapter(const ModelConfig& config, float magnitude, uint64_t seed);

// A deep copy of an f32 model whose linear weights are W + scale·B·A.
std::unique_ptr<Model> MergeLora(const Model& model, const LoraAdapter& adapter);

}  // namespace crossreg::testing
