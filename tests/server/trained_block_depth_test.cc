// A model that drafts for itself records how deep its outcome blocks were trained
// (config.json crossreg_draft.block_rows); requests that leave fork_depth unset on the
// blocks layout are served at that depth (or gamma, when smaller), never deeper, while
// an explicit fork_depth and the other layouts are left as asked.
#include "crossreg/v1/generation.pb.h"
#include "engine/decoding/decoding_config.h"
#include "engine/decoding/generation_request.h"
#include "engine/model/model_config.h"
#include "gtest/gtest.h"
#include "server/request_from_proto.h"

namespace crossreg::server {
namespace {

TEST(TrainedBlockDepthTest, UnsetForkDepthOnBlocksTakesTheTrainedRowsOrGamma) {
  DecodingConfig d;
  d.mode = DecodingMode::kLossless;
  d.draft_layout = DraftLayout::kBlocks;
  d.gamma = 8;
  DefaultForkDepthToTrainedRows(d, 6);
  EXPECT_EQ(d.fork_depth, 6);
  EXPECT_EQ(d.ForkDepth(), 6);
  d.fork_depth = 0;
  d.gamma = 2;
  DefaultForkDepthToTrainedRows(d, 6);
  EXPECT_EQ(d.fork_depth, 2);
  // Asked for, or nothing recorded, or another layout: unchanged.
  d.fork_depth = 8;
  d.gamma = 8;
  DefaultForkDepthToTrainedRows(d, 6);
  EXPECT_EQ(d.fork_depth, 8);
  d.fork_depth = 0;
  DefaultForkDepthToTrainedRows(d, 0);
  EXPECT_EQ(d.fork_depth, 0);
  d.draft_layout = DraftLayout::kChain;
  DefaultForkDepthToTrainedRows(d, 6);
  EXPECT_EQ(d.fork_depth, 0);
}

TEST(TrainedBlockDepthTest, ServerRequestsGetTheModelsDepthUnlessTheyAsk) {
  ModelConfig model;
  model.vocab_size = 300;
  model.max_position = 128;
  model.draft_placeholder = 299;
  model.draft_layout = "blocks";
  model.draft_block_rows = 6;
  DecodingEnvironment env;
  env.model = &model;
  env.has_adapter = true;
  env.placeholder_token = 299;
  RequestDefaults defaults;
  defaults.draft_layout = DraftLayout::kBlocks;
  defaults.block_rows = model.draft_block_rows;
  auto request = [&](int gamma, int fork_depth, v1::DecodingMode mode) {
    v1::GenerateRequest r;
    r.mutable_token_ids()->add_ids(5);
    r.mutable_token_ids()->add_ids(7);
    r.mutable_decoding()->set_mode(mode);
    r.mutable_decoding()->set_gamma(gamma);
    r.mutable_decoding()->set_fork_depth(fork_depth);
    auto out = RequestFromProto(r, env, defaults);
    EXPECT_TRUE(out.ok()) << out.status();
    return out.ok() ? out->request.decoding : DecodingConfig{};
  };
  const DecodingConfig deep = request(8, 0, v1::DECODING_MODE_LOSSLESS);
  EXPECT_TRUE(deep.blocks());
  EXPECT_EQ(deep.ForkDepth(), 6);
  EXPECT_LT(MaxDecodeRows(deep), MaxDecodeRows([&] {
              DecodingConfig untrained = deep;
              untrained.fork_depth = 8;
              return untrained;
            }()));
  EXPECT_EQ(request(3, 0, v1::DECODING_MODE_LOSSLESS).ForkDepth(), 3);
  EXPECT_EQ(request(8, 8, v1::DECODING_MODE_LOSSLESS).ForkDepth(), 8);
  // The server's default gamma, filled in first, is what the depth is capped by.
  defaults.gamma = 4;
  EXPECT_EQ(request(0, 0, v1::DECODING_MODE_LOSSLESS).ForkDepth(), 4);
  // n-gram requests draft no blocks: left alone.
  EXPECT_EQ(request(8, 0, v1::DECODING_MODE_NGRAM).fork_depth, 0);
}

}  // namespace
}  // namespace crossreg::server
