#include "engine/io/safetensors_file.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/gguf_writer.h"
#include "engine/io/safetensors_writer.h"

namespace crossreg {
namespace {

using ::crossreg::F32Entry;
using ::crossreg::SafetensorsEntry;
using ::testing::HasSubstr;

std::vector<SafetensorsEntry> SmallTensors() {
  return {F32Entry("w", {2, 3}, {1, 2, 3, 4, 5, 6}),
          {"h", "F16", {2}, std::string("\x00\x3c\x00\x40", 4)},
          {"b", "BF16", {2}, std::string("\x80\x3f\x00\x40", 4)}};
}

class SafetensorsTest : public ::testing::Test {
 protected:
  std::string Write(const std::string& name, const std::string& bytes) {
    const std::string path = dir_ + "/" + name;
    EXPECT_TRUE(testing::WriteBytes(path, bytes).ok());
    return path;
  }
  const std::string dir_ = testing::MakeTempDir("crossreg_st");
};

using SafetensorsFileTest = SafetensorsTest;
using SafetensorsCheckpointTest = SafetensorsTest;

TEST_F(SafetensorsFileTest, ReadsTensors) {
  auto file = SafetensorsFile::Open(
      Write("a.safetensors", SerializeSafetensors(SmallTensors(), {{"format", "pt"}})));
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_EQ((*file)->tensors().size(), 3u);
  const TensorRef* w = (*file)->Find("w");
  ASSERT_NE(w, nullptr);
  EXPECT_EQ(w->dtype, DType::kF32);
  EXPECT_EQ(w->shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(static_cast<const float*>(w->data)[4], 5.0f);
  const TensorRef* h = (*file)->Find("h");
  ASSERT_NE(h, nullptr);
  EXPECT_EQ(h->dtype, DType::kF16);
  EXPECT_EQ(F16ToF32(static_cast<const uint16_t*>(h->data)[1]), 2.0f);
  const TensorRef* b = (*file)->Find("b");
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(b->dtype, DType::kBF16);
  EXPECT_EQ(Bf16ToF32(static_cast<const uint16_t*>(b->data)[0]), 1.0f);
  EXPECT_EQ((*file)->Find("__metadata__"), nullptr);
}

TEST_F(SafetensorsFileTest, RejectsUnsupportedDtype) {
  auto tensors = SmallTensors();
  tensors.push_back({"int8.weight", "I8", {4}, std::string(4, '\1')});
  auto file = SafetensorsFile::Open(Write("i8.safetensors", SerializeSafetensors(tensors)));
  ASSERT_FALSE(file.ok());
  EXPECT_THAT(file.status().message(), HasSubstr("I8"));
  EXPECT_THAT(file.status().message(), HasSubstr("int8.weight"));
  EXPECT_THAT(file.status().message(), HasSubstr("i8.safetensors"));
}

TEST_F(SafetensorsFileTest, RejectsShapeThatDisagreesWithByteRange) {
  std::vector<SafetensorsEntry> tensors = {{"w", "F32", {2, 3}, std::string(20, '\0')}};
  auto file = SafetensorsFile::Open(Write("shape.safetensors", SerializeSafetensors(tensors)));
  ASSERT_FALSE(file.ok());
  EXPECT_THAT(file.status().message(), HasSubstr("'w'"));
  EXPECT_THAT(file.status().message(), HasSubstr("needs 24 bytes"));
}

TEST_F(SafetensorsFileTest, RejectsMalformedHeaders) {
  auto open_header = [&](const std::string& header) {
    std::string bytes(8, '\0');
    const uint64_t len = header.size();
    std::memcpy(bytes.data(), &len, 8);
    return SafetensorsFile::Open(Write("bad.safetensors", bytes + header));
  };
  auto not_json = open_header("{not json");
  ASSERT_FALSE(not_json.ok());
  EXPECT_THAT(not_json.status().message(), HasSubstr("not valid JSON"));
  auto not_object = open_header("[1, 2]");
  ASSERT_FALSE(not_object.ok());
  EXPECT_THAT(not_object.status().message(), HasSubstr("not a JSON object"));
  auto bad_shape = open_header(R"({"x": {"dtype": "F32", "shape": [-1], "data_offsets": [0, 0]}})");
  ASSERT_FALSE(bad_shape.ok());
  EXPECT_THAT(bad_shape.status().message(), HasSubstr("shape"));
  auto bad_offsets = open_header(R"({"x": {"dtype": "F32", "shape": [1], "data_offsets": [0]}})");
  ASSERT_FALSE(bad_offsets.ok());
  EXPECT_THAT(bad_offsets.status().message(), HasSubstr("data_offsets"));
  auto outside = open_header(R"({"x": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}})");
  ASSERT_FALSE(outside.ok());
  EXPECT_THAT(outside.status().message(), HasSubstr("outside the data section"));
  auto no_dtype = open_header(R"({"x": {"shape": [1], "data_offsets": [0, 4]}})");
  ASSERT_FALSE(no_dtype.ok());
  EXPECT_THAT(no_dtype.status().message(), HasSubstr("dtype"));
  auto overflow = open_header(
      R"({"x": {"dtype": "F32", "shape": [4294967296, 4294967296], "data_offsets": [0, 0]}})");
  ASSERT_FALSE(overflow.ok());
  EXPECT_THAT(overflow.status().message(), HasSubstr("overflows"));

  std::string huge_len(8, '\xff');
  auto too_long = SafetensorsFile::Open(Write("len.safetensors", huge_len + "{}"));
  ASSERT_FALSE(too_long.ok());
  EXPECT_THAT(too_long.status().message(), HasSubstr("header length"));
}

TEST_F(SafetensorsFileTest, TruncatedFileFailsCleanlyAtEveryOffset) {
  const std::string bytes = SerializeSafetensors(SmallTensors());
  for (size_t len = 0; len < bytes.size(); ++len) {
    auto file = SafetensorsFile::Open(Write("trunc.safetensors", bytes.substr(0, len)));
    ASSERT_FALSE(file.ok()) << "length " << len;
    EXPECT_THAT(file.status().message(), HasSubstr("trunc.safetensors")) << "length " << len;
  }
}

TEST_F(SafetensorsCheckpointTest, OpensSingleFile) {
  Write("model.safetensors", SerializeSafetensors(SmallTensors()));
  Write("ignored.safetensors", SerializeSafetensors({F32Entry("other", {1}, {1})}));
  auto ckpt = SafetensorsCheckpoint::OpenDirectory(dir_);
  ASSERT_TRUE(ckpt.ok()) << ckpt.status();
  EXPECT_EQ((*ckpt)->Names(), (std::vector<std::string>{"b", "h", "w"}));
  EXPECT_EQ((*ckpt)->Find("other"), nullptr);
  EXPECT_EQ((*ckpt)->Storage().size(), 1u);
}

TEST_F(SafetensorsCheckpointTest, OpensAllShardsWithoutIndex) {
  Write("b-00002.safetensors", SerializeSafetensors({F32Entry("y", {1}, {2})}));
  Write("a-00001.safetensors", SerializeSafetensors({F32Entry("x", {1}, {1})}));
  auto ckpt = SafetensorsCheckpoint::OpenDirectory(dir_);
  ASSERT_TRUE(ckpt.ok()) << ckpt.status();
  EXPECT_EQ((*ckpt)->Names(), (std::vector<std::string>{"x", "y"}));
  ASSERT_NE((*ckpt)->Find("y"), nullptr);
  EXPECT_EQ(static_cast<const float*>((*ckpt)->Find("y")->data)[0], 2.0f);
}

TEST_F(SafetensorsCheckpointTest, RejectsDuplicateTensorAcrossShards) {
  Write("a.safetensors", SerializeSafetensors({F32Entry("x", {1}, {1})}));
  Write("b.safetensors", SerializeSafetensors({F32Entry("x", {1}, {2})}));
  auto ckpt = SafetensorsCheckpoint::OpenDirectory(dir_);
  ASSERT_FALSE(ckpt.ok());
  EXPECT_THAT(ckpt.status().message(), HasSubstr("'x'"));
}

TEST_F(SafetensorsCheckpointTest, FollowsIndexWeightMap) {
  Write("s1.safetensors", SerializeSafetensors({F32Entry("x", {1}, {1})}));
  Write("s2.safetensors", SerializeSafetensors({F32Entry("y", {1}, {2})}));
  Write("model.safetensors.index.json",
        R"({"metadata": {}, "weight_map": {"x": "s1.safetensors", "y": "s2.safetensors"}})");
  auto ckpt = SafetensorsCheckpoint::OpenDirectory(dir_);
  ASSERT_TRUE(ckpt.ok()) << ckpt.status();
  EXPECT_EQ((*ckpt)->Names(), (std::vector<std::string>{"x", "y"}));
  EXPECT_EQ((*ckpt)->Storage().size(), 2u);
}

TEST_F(SafetensorsCheckpointTest, RejectsIndexListingTensorMissingFromShard) {
  Write("s1.safetensors", SerializeSafetensors({F32Entry("x", {1}, {1})}));
  Write("model.safetensors.index.json", R"({"weight_map": {"x": "s1.safetensors", "z": "s1.safetensors"}})");
  auto ckpt = SafetensorsCheckpoint::OpenDirectory(dir_);
  ASSERT_FALSE(ckpt.ok());
  EXPECT_THAT(ckpt.status().message(), HasSubstr("'z'"));
  EXPECT_THAT(ckpt.status().message(), HasSubstr("s1.safetensors"));
}

TEST_F(SafetensorsCheckpointTest, RejectsMalformedIndex) {
  Write("model.safetensors.index.json", R"({"weight_map": {"x": 3}})");
  auto ckpt = SafetensorsCheckpoint::OpenDirectory(dir_);
  ASSERT_FALSE(ckpt.ok());
  EXPECT_THAT(ckpt.status().message(), HasSubstr("weight_map entry 'x'"));
  Write("model.safetensors.index.json", R"({"weight_map": {"x": "../escape.safetensors"}})");
  ckpt = SafetensorsCheckpoint::OpenDirectory(dir_);
  ASSERT_FALSE(ckpt.ok());
  EXPECT_THAT(ckpt.status().message(), HasSubstr("invalid shard"));
  Write("model.safetensors.index.json", "not json");
  ckpt = SafetensorsCheckpoint::OpenDirectory(dir_);
  ASSERT_FALSE(ckpt.ok());
  EXPECT_THAT(ckpt.status().message(), HasSubstr("not valid JSON"));
}

TEST_F(SafetensorsCheckpointTest, EmptyDirectoryIsNotFound) {
  auto ckpt = SafetensorsCheckpoint::OpenDirectory(dir_);
  ASSERT_FALSE(ckpt.ok());
  EXPECT_TRUE(absl::IsNotFound(ckpt.status()));
}

}  // namespace
}  // namespace crossreg
