// A one-thread CPU backend and its KV cache over a test model, as the scheduler tests
// that run real forwards build them.
#pragma once

#include <memory>
#include <utility>

#include "engine/cpu/cpu_backend.h"
#include "engine/kv/paged_kv_cache.h"
#include "engine/model/lora_adapter.h"
#include "gtest/gtest.h"

namespace crossreg::testing {

struct CpuEngine {
  std::unique_ptr<Backend> backend;
  std::unique_ptr<PagedKvCache> kv;
};

inline CpuEngine MakeCpuEngine(const Model& model, const LoraAdapter& adapter, KvCacheConfig kv_config) {
  CpuBackendOptions options;
  options.num_threads = 1;
  options.adapter = &adapter;
  options.kv = kv_config;
  CpuEngine e;
  auto backend = CreateCpuBackend(model, options);
  EXPECT_TRUE(backend.ok()) << backend.status();
  if (backend.ok()) e.backend = std::move(*backend);
  e.kv = std::make_unique<PagedKvCache>(kv_config);
  return e;
}

}  // namespace crossreg::testing
