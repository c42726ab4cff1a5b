// The distillation data file: what the writer lays out is what the format says
// (magic, header length, JSON header, 8-aligned arrays at their offsets) and what the
// reader gives back; damaged files are refused.
#include "distill/distill_data_file.h"

#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/scheduler/scratch_dir.h"

namespace crossreg {
namespace {

using Json = nlohmann::json;
using testing::ScratchDir;

DistillData SmallData() {
  DistillData d;
  DistillDataHeader& h = d.header;
  h.model = "models/tiny.gguf";
  h.vocab_size = 512;
  h.bos_id = 1;
  h.eos_id = 2;
  h.window = 3;
  h.prefix_min = 2;
  h.prefix_max = 5;
  h.seed = 18446744073709551615ull;  // the largest seed survives JSON
  h.holdout_pct = 2.5;
  h.sources = {"a.jsonl", "dir/b.txt"};
  h.backend = "cpu (test)";
  h.seconds = 1.25;
  d.train.documents = 2;
  d.train.stream = {1, 10, 11, 12, 2, 1, 13, 14, 2};  // 9 tokens: odd, so the next array needs padding
  d.train.start = {0, 4, 6};
  d.train.length = {3, 2, 3};
  d.train.continuation = {5, 6, 7, 8, 9, 10, 11, 12, 13};
  d.eval.documents = 1;
  d.eval.stream = {1, 20, 21, 22, 2};
  d.eval.start = {1};
  d.eval.length = {2};
  d.eval.continuation = {30, 31, 32};
  return d;
}

std::string ReadBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

void ExpectSplitsEqual(const DistillSplitData& a, const DistillSplitData& b) {
  EXPECT_EQ(a.documents, b.documents);
  EXPECT_EQ(a.stream, b.stream);
  EXPECT_EQ(a.start, b.start);
  EXPECT_EQ(a.length, b.length);
  EXPECT_EQ(a.continuation, b.continuation);
}

TEST(DistillDataFileTest, WriterLaysOutTheFormatAndReaderGivesItBack) {
  ScratchDir dir("distill_file");
  const std::string path = dir.Path("d.bin");
  const DistillData data = SmallData();
  ASSERT_TRUE(WriteDistillDataFile(path, data).ok());
  EXPECT_FALSE(std::filesystem::exists(path + ".tmp"));

  // The bytes, read as the Python reader will.
  const std::string bytes = ReadBytes(path);
  ASSERT_GE(bytes.size(), 16u);
  EXPECT_EQ(bytes.substr(0, 8), "CRXDIST1");
  uint64_t header_bytes;
  std::memcpy(&header_bytes, bytes.data() + 8, 8);
  ASSERT_LE(16 + header_bytes, bytes.size());
  const Json h = Json::parse(bytes.substr(16, header_bytes));
  EXPECT_EQ(h["format"], "crossreg-distill-data");
  EXPECT_EQ(h["version"], 1);
  EXPECT_EQ(h["model"], "models/tiny.gguf");
  EXPECT_EQ(h["vocab_size"], 512);
  EXPECT_EQ(h["bos_id"], 1);
  EXPECT_EQ(h["eos_id"], 2);
  EXPECT_EQ(h["window"], 3);
  EXPECT_EQ(h["prefix_min"], 2);
  EXPECT_EQ(h["prefix_max"], 5);
  EXPECT_EQ(h["seed"].get<uint64_t>(), 18446744073709551615ull);
  EXPECT_EQ(h["holdout_pct"], 2.5);
  EXPECT_EQ(h["temperature"], 0);
  EXPECT_EQ(h["sources"], Json::array({"a.jsonl", "dir/b.txt"}));
  EXPECT_EQ(h["backend"], "cpu (test)");
  EXPECT_EQ(h["seconds"], 1.25);
  EXPECT_EQ(h["splits"]["train"], Json({{"documents", 2}, {"stream_tokens", 9}, {"examples", 3}}));
  EXPECT_EQ(h["splits"]["eval"], Json({{"documents", 1}, {"stream_tokens", 5}, {"examples", 1}}));
  ASSERT_EQ(h["arrays"].size(), 8u);
  auto expect_array = [&](const std::string& name, const std::string& dtype, int64_t count, const auto& values) {
    SCOPED_TRACE(name);
    const Json& a = h["arrays"][name];
    EXPECT_EQ(a["dtype"], dtype);
    EXPECT_EQ(a["count"], count);
    const int64_t offset = a["offset"].get<int64_t>();
    EXPECT_EQ(offset % 8, 0);
    EXPECT_GE(offset, static_cast<int64_t>(16 + header_bytes));
    using T = typename std::decay_t<decltype(values)>::value_type;
    ASSERT_LE(offset + count * static_cast<int64_t>(sizeof(T)), static_cast<int64_t>(bytes.size()));
    std::vector<T> got(static_cast<size_t>(count));
    std::memcpy(got.data(), bytes.data() + offset, got.size() * sizeof(T));
    EXPECT_EQ(got, values);
  };
  for (const auto& [name, split] : {std::pair<std::string, const DistillSplitData*>{"train", &data.train},
                                    std::pair<std::string, const DistillSplitData*>{"eval", &data.eval}}) {
    expect_array(name + ".stream", "int32", static_cast<int64_t>(split->stream.size()), split->stream);
    expect_array(name + ".start", "int64", split->examples(), split->start);
    expect_array(name + ".length", "int32", split->examples(), split->length);
    expect_array(name + ".continuation", "int32", split->examples() * 3, split->continuation);
  }
  // Padding between the arrays is zeros, and nothing trails the last one but padding.
  EXPECT_EQ(bytes.size() % 8, 0u);

  auto read = ReadDistillDataFile(path);
  ASSERT_TRUE(read.ok()) << read.status();
  const DistillDataHeader& r = read->header;
  EXPECT_EQ(r.model, data.header.model);
  EXPECT_EQ(r.vocab_size, 512);
  EXPECT_EQ(r.bos_id, 1);
  EXPECT_EQ(r.eos_id, 2);
  EXPECT_EQ(r.window, 3);
  EXPECT_EQ(r.prefix_min, 2);
  EXPECT_EQ(r.prefix_max, 5);
  EXPECT_EQ(r.seed, data.header.seed);
  EXPECT_EQ(r.holdout_pct, 2.5);
  EXPECT_EQ(r.temperature, 0);
  EXPECT_EQ(r.sources, data.header.sources);
  EXPECT_EQ(r.backend, "cpu (test)");
  EXPECT_EQ(r.seconds, 1.25);
  ExpectSplitsEqual(read->train, data.train);
  ExpectSplitsEqual(read->eval, data.eval);
}

TEST(DistillDataFileTest, EmptyEvalSplitRoundTrips) {
  ScratchDir dir("distill_file");
  DistillData data = SmallData();
  data.eval = DistillSplitData{};
  ASSERT_TRUE(WriteDistillDataFile(dir.Path("d.bin"), data).ok());
  auto read = ReadDistillDataFile(dir.Path("d.bin"));
  ASSERT_TRUE(read.ok()) << read.status();
  ExpectSplitsEqual(read->train, data.train);
  ExpectSplitsEqual(read->eval, data.eval);
}

TEST(DistillDataFileTest, WriterRefusesInconsistentSplitsAndLeavesNothing) {
  ScratchDir dir("distill_file");
  const std::string path = dir.Path("d.bin");
  DistillData short_continuation = SmallData();
  short_continuation.train.continuation.pop_back();
  EXPECT_FALSE(WriteDistillDataFile(path, short_continuation).ok());
  DistillData outside = SmallData();
  outside.eval.start = {4};  // [4, 6) in a stream of 5
  const absl::Status s = WriteDistillDataFile(path, outside);
  EXPECT_NE(s.message().find("eval: example 0's prefix"), std::string::npos) << s;
  EXPECT_FALSE(std::filesystem::exists(path));
  EXPECT_FALSE(std::filesystem::exists(path + ".tmp"));
  EXPECT_FALSE(WriteDistillDataFile(dir.Path("no/such/dir/d.bin"), SmallData()).ok());
}

TEST(DistillDataFileTest, ReaderRefusesDamagedFiles) {
  ScratchDir dir("distill_file");
  const std::string path = dir.Path("d.bin");
  ASSERT_TRUE(WriteDistillDataFile(path, SmallData()).ok());
  const std::string good = ReadBytes(path);
  auto write = [&](const std::string& bytes) { std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes; };

  std::string bad_magic = good;
  bad_magic[7] = '2';
  write(bad_magic);
  EXPECT_FALSE(ReadDistillDataFile(path).ok());

  write(good.substr(0, good.size() - 8));  // the last array runs past the end
  auto truncated = ReadDistillDataFile(path);
  ASSERT_FALSE(truncated.ok());
  EXPECT_NE(truncated.status().message().find("eval.continuation"), std::string::npos) << truncated.status();

  std::string huge_header = good;
  const uint64_t too_long = good.size();
  std::memcpy(huge_header.data() + 8, &too_long, 8);
  write(huge_header);
  EXPECT_FALSE(ReadDistillDataFile(path).ok());

  uint64_t header_bytes;
  std::memcpy(&header_bytes, good.data() + 8, 8);
  Json h = Json::parse(good.substr(16, header_bytes));
  h["arrays"]["train.length"]["offset"] = h["arrays"]["train.length"]["offset"].get<int64_t>() + 4;
  std::string misaligned = h.dump();
  misaligned.resize(header_bytes, ' ');  // same length, so the arrays stay where they are
  write(good.substr(0, 16) + misaligned + good.substr(16 + header_bytes));
  auto unaligned = ReadDistillDataFile(path);
  ASSERT_FALSE(unaligned.ok());
  EXPECT_NE(unaligned.status().message().find("train.length"), std::string::npos) << unaligned.status();

  write("CRXDIST1");
  EXPECT_FALSE(ReadDistillDataFile(path).ok());
  EXPECT_FALSE(ReadDistillDataFile(dir.Path("missing.bin")).ok());
}

}  // namespace
}  // namespace crossreg
