// Lossy acceptance: tokens per forward rise with beta and with -tau.
#include <cstdio>

#include "scheduler/generate.h"
#include "engine/model/random_model.h"
#include "gtest/gtest.h"
#include "tests/testing/tiny_models.h"

namespace crossreg {
namespace {

double MeanTpf(testing::EngineUnderTest& e, const Model& model, float beta, float tau, float temperature) {
  int64_t committed = 0, forwards = 0;
  for (int prompt = 0; prompt < 6; ++prompt) {
    for (uint64_t seed = 0; seed < 8; ++seed) {
      GenerationRequest req;
      req.prompt_ids = {static_cast<int32_t>(prompt), static_cast<int32_t>(prompt * 7 % 40), 3};
      req.max_new_tokens = 40;
      req.stop_at_eos = false;
      req.sampling.temperature = temperature;
      req.sampling.seed = seed;
      req.decoding.mode = DecodingMode::kLossy;
      req.decoding.gamma = 8;
      req.decoding.beta = beta;
      req.decoding.tau = tau;
      auto r = Generate(*e.backend, *e.kv, req, e.env);
      EXPECT_TRUE(r.ok()) << r.status();
      committed += r->stats.committed;
      forwards += r->stats.forwards;
    }
  }
  return static_cast<double>(committed) / forwards;
}

class LossyMonotonicityTest : public ::testing::TestWithParam<float> {
 protected:
  void SetUp() override {
    model_ = MakeRandomModel(testing::TinyConfig(40), {DType::kF32, 31, 2.0f});
    RandomLoraOptions lo;
    lo.magnitude = 3.0f;
    lo.seed = 32;
    adapter_ = MakeRandomLoraAdapter(model_->config, lo);
  }
  std::unique_ptr<Model> model_;
  std::unique_ptr<LoraAdapter> adapter_;
};

TEST_P(LossyMonotonicityTest, TokensPerForwardRiseWithMinusTau) {
  auto e = testing::MakeEngine(*model_, adapter_.get());
  double previous = 0, first = 0;
  for (float tau : {0.0f, -0.5f, -1.0f, -2.0f, -4.0f}) {
    const double tpf = MeanTpf(e, *model_, 0.0f, tau, GetParam());
    std::printf("T=%.1f beta=0 tau=%.1f: TPF %.3f\n", GetParam(), tau, tpf);
    EXPECT_GE(tpf, previous) << "tau " << tau;
    if (previous == 0) first = tpf;
    previous = tpf;
  }
  EXPECT_GT(previous, first) << "lowering tau never accepted more";
}

TEST_P(LossyMonotonicityTest, TokensPerForwardRiseWithBeta) {
  auto e = testing::MakeEngine(*model_, adapter_.get());
  double previous = 0, first = 0;
  for (float beta : {0.0f, 0.3f, 0.6f, 0.9f}) {
    const double tpf = MeanTpf(e, *model_, beta, -1.0f, GetParam());
    std::printf("T=%.1f beta=%.1f tau=-1: TPF %.3f\n", GetParam(), beta, tpf);
    EXPECT_GE(tpf, previous) << "beta " << beta;
    if (previous == 0) first = tpf;
    previous = tpf;
  }
  // At T=0 every energy is <= 0 (docs/algorithm.md), so beta cannot add acceptance
  // there; when sampling it must.
  if (GetParam() > 0.0f) {
    EXPECT_GT(previous, first) << "raising beta never accepted more";
  }
}

INSTANTIATE_TEST_SUITE_P(Temperatures, LossyMonotonicityTest, ::testing::Values(1.0f, 0.0f),
                         [](const auto& info) { return info.param == 0.0f ? std::string("Greedy") : std::string("T1"); });

}  // namespace
}  // namespace crossreg
