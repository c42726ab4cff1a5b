// The engine computes what the trainer (PyTorch) computes: base logits of a prefix,
// control rows and predictive (base + LoRA) rows in the Cross-Regression layout, and
// outcome blocks (docs/algorithm.md),
// on the fixture `python3 -m training export-fixture` writes (CROSSREG_PARITY_FIXTURE).
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>

#include "engine/cpu/cpu_backend.h"
#include "engine/model/lora_adapter.h"
#include "engine/model/model_loader.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace crossreg {
namespace {

std::string FixtureDir() {
  const char* dir = std::getenv("CROSSREG_PARITY_FIXTURE");
  return dir ? dir : "";
}

float worst_seen = 0;  // largest |engine − PyTorch| over the fixture, printed at the end

float MaxAbsDiff(const float* got, const std::vector<float>& want) {
  float m = 0;
  for (size_t i = 0; i < want.size(); ++i) m = std::max(m, std::fabs(got[i] - want[i]));
  worst_seen = std::max(worst_seen, m);
  return m;
}

TEST(TrainerParityTest, ControlAndPredictiveLogitsMatchPyTorch) {
  const std::string dir = FixtureDir();
  if (dir.empty()) GTEST_SKIP() << "CROSSREG_PARITY_FIXTURE not set (ctest sets it after running export-fixture)";
  std::ifstream in(dir + "/fixture.json");
  ASSERT_TRUE(in.good()) << dir << "/fixture.json";
  const auto fx = nlohmann::json::parse(in, nullptr, false);
  ASSERT_FALSE(fx.is_discarded());
  ASSERT_EQ(fx["format"], "crossreg-fixture-v1");
  auto model = LoadModel(dir + "/" + fx["model_dir"].get<std::string>());
  ASSERT_TRUE(model.ok()) << model.status();
  auto adapter = LoadLoraAdapter(dir + "/" + fx["adapter_dir"].get<std::string>(), (*model)->config);
  ASSERT_TRUE(adapter.ok()) << adapter.status();
  EXPECT_EQ((*adapter)->placeholder_token_id, fx["placeholder_token_id"].get<int>());
  const int V = fx["vocab_size"].get<int>();
  ASSERT_EQ((*model)->config.vocab_size, V);
  CpuBackendOptions options;
  options.num_threads = 1;
  options.adapter = adapter->get();
  options.kv = {4, 64};
  auto backend = CreateCpuBackend(**model, options);
  ASSERT_TRUE(backend.ok()) << backend.status();
  PagedKvCache kv(options.kv);
  ASSERT_GE(fx["cases"].size(), 3u);
  size_t block_cases = 0;
  for (const auto& c : fx["cases"]) {
    const auto prefix = c["prefix"].get<std::vector<int32_t>>();
    const auto rows = c["rows"].get<std::vector<int32_t>>();
    const auto positions = c["row_positions"].get<std::vector<int32_t>>();
    const int m = c["num_drafts"].get<int>();
    SCOPED_TRACE(::testing::Message() << "L=" << prefix.size() << " m=" << m);
    // 1. Plain causal forward over the prefix: every position's logits.
    const SequenceId whole = kv.CreateSequence();
    ForwardBatch b;
    for (size_t p = 0; p < prefix.size(); ++p)
      b.rows.push_back({.seq = whole, .position = static_cast<int32_t>(p), .token = prefix[p], .want_logits = true});
    std::vector<float> logits;
    ASSERT_TRUE((*backend)->Forward(b, kv, logits).ok());
    const auto& want_prefix = c["prefix_logits"];
    for (size_t p = 0; p < prefix.size(); ++p) {
      EXPECT_LE(MaxAbsDiff(logits.data() + p * V, want_prefix[p].get<std::vector<float>>()), 1e-3f)
          << "prefix row " << p;
    }
    kv.Free(whole);
    // 2. The XR forward: cache x[0..L-2], then control rows [x_last, d_1..] and
    //    predictive rows [x_last, d_1.., placeholder..] in one batch.
    const SequenceId seq = kv.CreateSequence();
    b.rows.clear();
    for (size_t p = 0; p + 1 < prefix.size(); ++p)
      b.rows.push_back({.seq = seq, .position = static_cast<int32_t>(p), .token = prefix[p]});
    if (!b.rows.empty()) {
      ASSERT_TRUE((*backend)->Forward(b, kv, logits).ok());
    }
    b.rows.clear();
    const size_t gamma = rows.size();
    for (size_t k = 0; k < gamma; ++k)
      b.rows.push_back({.seq = seq, .position = positions[k], .token = rows[k], .want_logits = true});
    for (size_t k = 0; k < gamma; ++k)
      b.rows.push_back(
          {.seq = seq, .position = positions[k], .token = rows[k], .want_logits = true, .predictive = true});
    ASSERT_TRUE((*backend)->Forward(b, kv, logits).ok());
    const auto& want_control = c["control_logits"];
    const auto& want_predictive = c["predictive_logits"];
    for (size_t k = 0; k < gamma; ++k) {
      EXPECT_LE(MaxAbsDiff(logits.data() + k * V, want_control[k].get<std::vector<float>>()), 1e-3f)
          << "control row " << k;
      EXPECT_LE(MaxAbsDiff(logits.data() + (gamma + k) * V, want_predictive[k].get<std::vector<float>>()), 1e-3f)
          << "predictive row " << k;
    }
    ASSERT_TRUE(KvTransaction(kv).Commit(seq, static_cast<int64_t>(prefix.size()) - 1).ok());  // the cache before the XR forward
    // 3. Outcome blocks: control rows [x_last, d_1..d_m] and, for every outcome n, a block
    //    of placeholder rows after d_n attending d_0..d_n and itself both ways.
    if (c.contains("block_logits")) {
      const int f = c["block_rows"].get<int>();
      const int32_t ph = fx["placeholder_token_id"].get<int32_t>();
      b.rows.clear();
      for (int k = 0; k <= m; ++k)
        b.rows.push_back({.seq = seq, .position = positions[k], .token = rows[k], .want_logits = true});
      for (int n = 0; n <= m; ++n) {
        for (int j = 0; j < f; ++j)
          b.rows.push_back({.seq = seq, .position = positions[0] + n + 1 + j, .token = ph, .want_logits = true,
                            .predictive = true, .branch = n + 1, .block = true});
      }
      ASSERT_TRUE((*backend)->Forward(b, kv, logits).ok());
      const auto& want_blocks = c["block_logits"];
      ASSERT_EQ(want_blocks.size(), static_cast<size_t>(m + 1));
      for (int n = 0; n <= m; ++n) {
        for (int j = 0; j < f; ++j) {
          EXPECT_LE(MaxAbsDiff(logits.data() + static_cast<size_t>(m + 1 + n * f + j) * V,
                               want_blocks[n][j].get<std::vector<float>>()),
                    1e-3f)
              << "block of outcome " << n << ", row " << j;
        }
      }
      ++block_cases;
    }
    kv.Free(seq);
  }
  EXPECT_EQ(block_cases, fx["cases"].size()) << "the fixture has no outcome blocks: re-export it";
  EXPECT_EQ(kv.Stats().used_blocks, 0);
  std::printf("largest |engine - PyTorch| logit difference over %zu cases: %.3g\n", fx["cases"].size(), worst_seen);
}

}  // namespace
}  // namespace crossreg
