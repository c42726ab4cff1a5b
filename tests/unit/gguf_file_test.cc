#include "engine/io/gguf_file.h"

#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/gguf_writer.h"
#include "tests/testing/test_paths.h"

namespace crossreg {
namespace {

using ::crossreg::testing::GgufWriter;
using ::testing::HasSubstr;

// A small file touching every metadata value type and two tensors.
GgufWriter SmallWriter() {
  GgufWriter w;
  w.SetString("general.architecture", "llama");
  w.SetUint32("llama.block_count", 2);
  w.SetInt32("some.negative", -7);
  w.SetUint64("some.big", 1ull << 40);
  w.SetFloat32("llama.rope.freq_base", 500000.0f);
  w.SetBool("some.flag", true);
  w.SetStringArray("tokenizer.ggml.tokens", {"<unk>", "a", "bc"});
  w.SetFloat32Array("tokenizer.ggml.scores", {0.0f, -1.5f, 2.0f});
  w.SetInt32Array("tokenizer.ggml.token_type", {2, 1, 1});
  w.SetTensorF32("a.weight", {2, 3}, {1, 2, 3, 4, 5, 6});
  w.SetTensorF32("b.bias", {8}, {7, 8, 9, 10, 11, 12, 13, 14});  // no trailing padding
  return w;
}

std::string TempPath(const std::string& name) {
  static const std::string dir = testing::MakeTempDir("crossreg_gguf");
  return dir + "/" + name;
}

absl::StatusOr<std::unique_ptr<GgufFile>> OpenBytes(const std::string& bytes,
                                                   const std::string& name = "t.gguf") {
  const std::string path = TempPath(name);
  absl::Status s = testing::WriteBytes(path, bytes);
  if (!s.ok()) return s;
  return GgufFile::Open(path);
}

TEST(GgufFileTest, OpensStories260K) {
  auto file = GgufFile::Open(testing::Stories260KGguf());
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_EQ((*file)->version(), 3u);
  EXPECT_EQ((*file)->tensors().size(), 48u);
  EXPECT_EQ(*(*file)->metadata().GetString("general.architecture"), "llama");
  EXPECT_EQ(*(*file)->metadata().GetInt("llama.embedding_length"), 64);
  auto tokens = (*file)->metadata().GetStringArray("tokenizer.ggml.tokens");
  ASSERT_TRUE(tokens.ok());
  EXPECT_EQ(tokens->size(), 512u);
  const GgufTensorInfo* emb = (*file)->FindTensor("token_embd.weight");
  ASSERT_NE(emb, nullptr);
  EXPECT_EQ(emb->dtype, DType::kF32);
  EXPECT_EQ(emb->shape, (std::vector<int64_t>{512, 64}));
  const GgufTensorInfo* wq = (*file)->FindTensor("blk.0.attn_q.weight");
  ASSERT_NE(wq, nullptr);
  EXPECT_EQ(wq->shape, (std::vector<int64_t>{64, 64}));
  const GgufTensorInfo* w1 = (*file)->FindTensor("blk.0.ffn_gate.weight");
  ASSERT_NE(w1, nullptr);
  EXPECT_EQ(w1->shape, (std::vector<int64_t>{172, 64}));

  // The embedding is byte-identical to the llama2.c checkpoint's first table.
  auto bin = testing::ReadBytes(testing::SharedDir() + "/models/stories260K/stories260K.bin");
  ASSERT_TRUE(bin.ok());
  ASSERT_GE(bin->size(), 28 + emb->ref.nbytes());
  EXPECT_EQ(std::memcmp(bin->data() + 28, emb->ref.data, emb->ref.nbytes()), 0);
}

TEST(GgufFileTest, RoundTripsEveryValueType) {
  auto file = OpenBytes(SmallWriter().Serialize());
  ASSERT_TRUE(file.ok()) << file.status();
  const GgufMetadata& md = (*file)->metadata();
  EXPECT_EQ(*md.GetString("general.architecture"), "llama");
  EXPECT_EQ(*md.GetInt("llama.block_count"), 2);
  EXPECT_EQ(*md.GetInt("some.negative"), -7);
  EXPECT_EQ(*md.GetInt("some.big"), int64_t{1} << 40);
  EXPECT_EQ(*md.GetFloat("llama.rope.freq_base"), 500000.0);
  EXPECT_EQ(*md.GetFloat("llama.block_count"), 2.0);  // ints read as floats too
  EXPECT_TRUE(*md.GetBool("some.flag"));
  EXPECT_EQ(*md.GetStringArray("tokenizer.ggml.tokens"),
            (std::vector<std::string>{"<unk>", "a", "bc"}));
  EXPECT_EQ(*md.GetNumberArray("tokenizer.ggml.scores"), (std::vector<double>{0, -1.5, 2}));
  EXPECT_EQ(*md.GetNumberArray("tokenizer.ggml.token_type"), (std::vector<double>{2, 1, 1}));

  const GgufTensorInfo* a = (*file)->FindTensor("a.weight");
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a->shape, (std::vector<int64_t>{2, 3}));
  const float* av = static_cast<const float*>(a->ref.data);
  EXPECT_EQ(av[5], 6.0f);
  const GgufTensorInfo* b = (*file)->FindTensor("b.bias");
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(static_cast<const float*>(b->ref.data)[2], 9.0f);
  EXPECT_EQ((*file)->FindTensor("nope"), nullptr);
}

TEST(GgufFileTest, TypedGettersReportMissingAndWrongType) {
  auto file = OpenBytes(SmallWriter().Serialize());
  ASSERT_TRUE(file.ok()) << file.status();
  const GgufMetadata& md = (*file)->metadata();
  auto missing = md.GetInt("llama.nothing");
  EXPECT_TRUE(absl::IsNotFound(missing.status()));
  EXPECT_THAT(missing.status().message(), HasSubstr("llama.nothing"));
  auto wrong = md.GetInt("general.architecture");
  EXPECT_TRUE(absl::IsInvalidArgument(wrong.status()));
  EXPECT_THAT(wrong.status().message(), HasSubstr("general.architecture"));
  EXPECT_THAT(wrong.status().message(), HasSubstr("string"));
  EXPECT_FALSE(md.GetStringArray("tokenizer.ggml.scores").ok());
  EXPECT_FALSE(md.GetNumberArray("tokenizer.ggml.tokens").ok());
  EXPECT_FALSE(md.GetBool("llama.block_count").ok());
}

TEST(GgufFileTest, HonoursCustomAlignment) {
  GgufWriter w = SmallWriter();
  w.SetAlignment(64);
  auto file = OpenBytes(w.Serialize());
  ASSERT_TRUE(file.ok()) << file.status();
  const GgufTensorInfo* b = (*file)->FindTensor("b.bias");
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(b->offset, 64u);
  EXPECT_EQ(static_cast<const float*>(b->ref.data)[0], 7.0f);
}

TEST(GgufFileTest, AcceptsVersion2AndF16AndBf16) {
  GgufWriter w = SmallWriter();
  w.SetVersion(2);
  w.SetTensor("h.weight", testing::kGgmlF16, {2}, std::string("\x00\x3c\x00\x40", 4));
  w.SetTensor("g.weight", testing::kGgmlBF16, {2}, std::string("\x80\x3f\x00\x40", 4));
  auto file = OpenBytes(w.Serialize());
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_EQ((*file)->version(), 2u);
  const GgufTensorInfo* h = (*file)->FindTensor("h.weight");
  ASSERT_NE(h, nullptr);
  EXPECT_EQ(h->dtype, DType::kF16);
  EXPECT_EQ(F16ToF32(static_cast<const uint16_t*>(h->ref.data)[1]), 2.0f);
  const GgufTensorInfo* g = (*file)->FindTensor("g.weight");
  ASSERT_NE(g, nullptr);
  EXPECT_EQ(g->dtype, DType::kBF16);
  EXPECT_EQ(Bf16ToF32(static_cast<const uint16_t*>(g->ref.data)[0]), 1.0f);
}

TEST(GgufFileTest, EmptyFileIsAnError) {
  auto file = OpenBytes("", "empty.gguf");
  ASSERT_FALSE(file.ok());
  EXPECT_THAT(file.status().message(), HasSubstr("empty.gguf"));
  EXPECT_THAT(file.status().message(), HasSubstr("magic"));
}

TEST(GgufFileTest, MissingFileIsNotFound) {
  auto file = GgufFile::Open("/nonexistent/dir/model.gguf");
  ASSERT_FALSE(file.ok());
  EXPECT_TRUE(absl::IsNotFound(file.status()));
  EXPECT_THAT(file.status().message(), HasSubstr("/nonexistent/dir/model.gguf"));
}

TEST(GgufFileTest, RejectsUnsupportedVersion) {
  GgufWriter w = SmallWriter();
  w.SetVersion(1);
  auto file = OpenBytes(w.Serialize());
  ASSERT_FALSE(file.ok());
  EXPECT_THAT(file.status().message(), HasSubstr("version 1"));
}

TEST(GgufFileTest, RejectsNestedArray) {
  GgufValue nested;
  nested.kind = GgufValue::Kind::kArray;
  nested.gguf_type = 9;
  nested.array_type = 9;
  GgufWriter w = SmallWriter();
  w.SetValue("bad.nested", nested);
  auto file = OpenBytes(w.Serialize());
  ASSERT_FALSE(file.ok());
  EXPECT_THAT(file.status().message(), HasSubstr("bad.nested"));
}

TEST(GgufFileTest, RejectsTooManyDimensions) {
  GgufWriter w = SmallWriter();
  w.SetTensorF32("five.d", {1, 1, 1, 1, 2}, {1, 2});
  auto file = OpenBytes(w.Serialize());
  ASSERT_FALSE(file.ok());
  EXPECT_THAT(file.status().message(), HasSubstr("n_dims 5"));
  EXPECT_THAT(file.status().message(), HasSubstr("five.d"));
}

TEST(GgufFileTest, RejectsOverflowingShape) {
  GgufWriter w = SmallWriter();
  w.SetTensor("huge.weight", testing::kGgmlF32, {int64_t{1} << 40, int64_t{1} << 40}, "");
  auto file = OpenBytes(w.Serialize());
  ASSERT_FALSE(file.ok());
  EXPECT_THAT(file.status().message(), HasSubstr("huge.weight"));
}

TEST(GgufFileTest, RejectsTensorDataPastEndOfFile) {
  GgufWriter w = SmallWriter();
  // Declares 1024x1024 floats but carries only 4 bytes.
  w.SetTensor("big.weight", testing::kGgmlF32, {1024, 1024}, std::string(4, '\0'));
  auto file = OpenBytes(w.Serialize());
  ASSERT_FALSE(file.ok());
  EXPECT_THAT(file.status().message(), HasSubstr("big.weight"));
  EXPECT_THAT(file.status().message(), HasSubstr("past the end"));
}

TEST(GgufFileTest, RejectsHugeCountsWithoutAllocating) {
  // A header claiming 2^60 key/values in a tiny file.
  std::string bytes = SmallWriter().Serialize();
  const uint64_t huge = uint64_t{1} << 60;
  std::memcpy(bytes.data() + 16, &huge, 8);  // kv_count
  auto file = OpenBytes(bytes);
  ASSERT_FALSE(file.ok());
  EXPECT_THAT(file.status().message(), HasSubstr("key/value count"));

  bytes = SmallWriter().Serialize();
  std::memcpy(bytes.data() + 8, &huge, 8);  // tensor_count
  file = OpenBytes(bytes);
  ASSERT_FALSE(file.ok());
  EXPECT_THAT(file.status().message(), HasSubstr("tensor count"));

  // First key's string length.
  bytes = SmallWriter().Serialize();
  std::memcpy(bytes.data() + 24, &huge, 8);
  file = OpenBytes(bytes);
  ASSERT_FALSE(file.ok());
  EXPECT_THAT(file.status().message(), HasSubstr("metadata entry #0"));
}

TEST(GgufFileTest, TruncatedStoriesFailsCleanlyInHeaderAndData) {
  auto full = testing::ReadBytes(testing::Stories260KGguf());
  ASSERT_TRUE(full.ok());
  auto file = GgufFile::Open(testing::Stories260KGguf());
  ASSERT_TRUE(file.ok());
  // Start of the data section: the lowest tensor address minus its offset.
  size_t data_start = full->size();
  for (const GgufTensorInfo& t : (*file)->tensors()) {
    const size_t at = static_cast<const unsigned char*>(t.ref.data) - (*file)->mapping()->data();
    data_start = std::min(data_start, at - static_cast<size_t>(t.offset));
  }
  ASSERT_GT(data_start, 1000u);
  std::vector<size_t> lengths;
  for (size_t len = 0; len <= data_start; ++len) lengths.push_back(len);
  for (size_t len = data_start + 1; len < full->size(); len += 4099) lengths.push_back(len);
  lengths.push_back(full->size() - 1);
  // Write once, then shrink in place: far cheaper than rewriting every prefix.
  const std::string path = TempPath("trunc_stories.gguf");
  ASSERT_TRUE(testing::WriteBytes(path, *full).ok());
  std::sort(lengths.rbegin(), lengths.rend());
  for (size_t len : lengths) {
    ASSERT_EQ(::truncate(path.c_str(), static_cast<off_t>(len)), 0);
    auto truncated = GgufFile::Open(path);
    ASSERT_FALSE(truncated.ok()) << "length " << len;
    EXPECT_THAT(truncated.status().message(), HasSubstr("trunc_stories.gguf")) << len;
  }
}

TEST(GgufFileTest, TruncatedSmallFileFailsCleanlyAtEveryOffset) {
  const std::string bytes = SmallWriter().Serialize();
  for (size_t len = 0; len < bytes.size(); ++len) {
    auto file = OpenBytes(bytes.substr(0, len), "trunc_small.gguf");
    ASSERT_FALSE(file.ok()) << "length " << len;
    EXPECT_THAT(file.status().message(), HasSubstr("trunc_small.gguf")) << "length " << len;
  }
  EXPECT_TRUE(OpenBytes(bytes, "trunc_small.gguf").ok());
}

}  // namespace
}  // namespace crossreg
