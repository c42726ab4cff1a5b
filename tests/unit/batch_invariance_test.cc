// Batch invariance, bitwise, on every SIMD path this CPU has, both K/V element types,
// small heads and large ones, K/V blocks of 4 (one key at a time) and of 16 (keys in
// lanes, rows of a sequence attended together), one thread, a row-split forward and
// per-op threads: a control row's logits are
// the same bits whether it runs alone (an AR step) or inside a verify step with other
// control rows, predictive rows and another sequence's rows. Lossless decoding's
// token-for-token identity with AR rests on this.
#include <cstring>
#include <iterator>
#include <string>
#include <tuple>
#include <vector>

#include "engine/cpu/cpu_features.h"
#include "engine/model/random_model.h"
#include "gtest/gtest.h"
#include "tests/testing/tiny_models.h"

namespace crossreg {
namespace {

// How the engine runs the batch: threads, K/V block size, rows split between threads.
struct Threading {
  const char* name;
  testing::EngineThreading threading;
};
const Threading kThreadings[] = {
    {"t1_bs4", {.threads = 1, .block_size = 4, .row_split = true}},
    {"t1_bs16", {.threads = 1, .block_size = 16, .row_split = true}},
    // 15 rows over 3 threads: 5 each, so sequence b's control rows straddle two threads.
    {"t3_bs16_rowsplit", {.threads = 3, .block_size = 16, .row_split = true}},
    {"t2_bs16_perop", {.threads = 2, .block_size = 16, .row_split = false}},
};
using Params = std::tuple<cpu::SimdLevel, KvDtype, int /*head_dim*/, DType, int /*kThreadings index*/>;

ModelConfig ConfigWithHeadDim(int head_dim) {
  ModelConfig c = testing::TinyConfig(80);
  c.num_heads = 4;
  c.num_kv_heads = 2;
  c.head_dim = head_dim;
  c.hidden_size = 4 * head_dim;
  return c;
}

class BatchInvarianceTest : public ::testing::TestWithParam<Params> {};

TEST_P(BatchInvarianceTest, ControlRowLogitsAreTheSameBitsAloneAndInAVerifyStep) {
  const auto [level, kv_dtype, head_dim, weights, threading] = GetParam();
  auto model = MakeRandomModel(ConfigWithHeadDim(head_dim), {weights, 11, 1.0f});
  RandomLoraOptions lo;
  lo.magnitude = 2.0f;
  auto adapter = MakeRandomLoraAdapter(model->config, lo);
  auto e = testing::MakeEngine(*model, adapter.get(), 512, level, kv_dtype, kThreadings[threading].threading);
  const int vocab = model->config.vocab_size;
  const std::vector<int32_t> prefix = {3, 14, 15, 9, 26, 5, 35, 8, 9, 7, 9, 32, 38, 4, 6, 2, 64, 33, 8, 3, 27};
  const std::vector<int32_t> step = {50, 28, 8, 41, 9, 71};
  const int32_t n = static_cast<int32_t>(prefix.size());
  auto prefill = [&](SequenceId seq) {
    ForwardBatch b;
    for (int32_t p = 0; p < n; ++p) b.rows.push_back({.seq = seq, .position = p, .token = prefix[p]});
    std::vector<float> logits;
    ASSERT_TRUE(e.backend->Forward(b, *e.kv, logits).ok());
  };
  // Alone: one row per forward, as AR decoding appends them.
  const SequenceId a = e.kv->CreateSequence();
  prefill(a);
  std::vector<std::vector<float>> alone;
  for (size_t k = 0; k < step.size(); ++k) {
    ForwardBatch b{{{.seq = a, .position = n + static_cast<int32_t>(k), .token = step[k], .want_logits = true}}};
    std::vector<float> logits;
    ASSERT_TRUE(e.backend->Forward(b, *e.kv, logits).ok());
    alone.push_back(logits);
  }
  // Together: the same rows as one verify step, with predictive rows of the same
  // sequence and rows of another sequence in between.
  const SequenceId b = e.kv->CreateSequence(), other = e.kv->CreateSequence();
  prefill(b);
  ForwardBatch batch;
  for (int32_t p = 0; p < 5; ++p) batch.rows.push_back({.seq = other, .position = p, .token = 7 + p, .want_logits = true});
  for (size_t k = 0; k < step.size(); ++k) {
    batch.rows.push_back({.seq = b, .position = n + static_cast<int32_t>(k), .token = step[k], .want_logits = true});
  }
  for (int32_t k = 0; k < 4; ++k) {
    batch.rows.push_back(
        {.seq = b, .position = n - 1 + k, .token = k == 0 ? prefix.back() : step[k - 1], .want_logits = true,
         .predictive = true});
  }
  std::vector<float> logits;
  ASSERT_TRUE(e.backend->Forward(batch, *e.kv, logits).ok());
  for (size_t k = 0; k < step.size(); ++k) {
    EXPECT_EQ(std::memcmp(logits.data() + (5 + k) * vocab, alone[k].data(), sizeof(float) * vocab), 0)
        << "row " << k << " differs";
  }
}

std::vector<Params> AllParams() {
  std::vector<Params> out;
  for (cpu::SimdLevel level : cpu::AvailableSimdLevels()) {
    for (KvDtype kv : {KvDtype::kF32, KvDtype::kBf16}) {
      for (int hd : {8, 64}) {
        for (DType w : {DType::kF32, DType::kBF16}) {
          for (int t = 0; t < static_cast<int>(std::size(kThreadings)); ++t) out.emplace_back(level, kv, hd, w, t);
        }
      }
    }
  }
  return out;
}

std::string ParamName(const ::testing::TestParamInfo<Params>& info) {
  return std::string(cpu::SimdLevelName(std::get<0>(info.param))) + "_kv" + KvDtypeName(std::get<1>(info.param)) +
         "_hd" + std::to_string(std::get<2>(info.param)) + "_" + std::string(DTypeName(std::get<3>(info.param))) + "_" +
         kThreadings[std::get<4>(info.param)].name;
}

INSTANTIATE_TEST_SUITE_P(EveryPath, BatchInvarianceTest, ::testing::ValuesIn(AllParams()), ParamName);

}  // namespace
}  // namespace crossreg
