// A CUDA backend with its KV cache, and greedy generation through the engine's decoder:
// the end-to-end GPU tests' engine (exactness, FP8 weights).
#pragma once

#include <memory>
#include <vector>

#include "engine/cuda/cuda_backend.h"
#include "scheduler/generate.h"
#include "tests/gpu/gpu_test_support.h"

namespace crossreg::testing {

struct GpuEngine {
  std::unique_ptr<Backend> backend;
  std::unique_ptr<PagedKvCache> kv;
};

// Room for `tokens` positions in blocks of 4; CROSSREG_TEST_* overrides applied.
inline GpuEngine MakeGpuEngine(const Model& model, const LoraAdapter* adapter, int tokens,
                               CudaWeights weights = CudaWeights::kBf16) {
  CudaBackendOptions options;
  options.adapter = adapter;
  options.weights = weights;
  options.kv = {4, (tokens + 3) / 4};
  ApplyTestOverrides(options);
  GpuEngine e;
  auto backend = CreateCudaBackend(model, options);
  EXPECT_TRUE(backend.ok()) << backend.status();
  if (backend.ok()) e.backend = std::move(*backend);
  e.kv = std::make_unique<PagedKvCache>(options.kv);
  return e;
}

inline std::vector<int32_t> GreedyIds(GpuEngine& e, const Model& model, const std::vector<int32_t>& prompt,
                                      int max_new, DecodingMode mode, int gamma, int fork_outcomes = 0,
                                      DraftLayout layout = DraftLayout::kChain) {
  GenerationRequest req;
  req.prompt_ids = prompt;
  req.max_new_tokens = max_new;
  req.decoding.mode = mode;
  req.decoding.gamma = gamma;
  req.decoding.fork_outcomes = fork_outcomes;
  req.decoding.draft_layout = layout;
  req.stop_at_eos = false;
  const DecodingEnvironment env{.model = &model.config, .has_adapter = true};
  auto r = Generate(*e.backend, *e.kv, req, env);
  EXPECT_TRUE(r.ok()) << r.status();
  return r.ok() ? r->ids : std::vector<int32_t>{};
}

}  // namespace crossreg::testing
