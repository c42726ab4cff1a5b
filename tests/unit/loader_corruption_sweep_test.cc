// Deterministic corruption sweeps over every file each loader reads: a GGUF model, a
// Hugging Face directory (config.json, tokenizer.json, generation_config.json, the
// sharded index and its shards) and a PEFT adapter directory. At many offsets a byte is
// flipped or set, or the file is cut short; each load must then either succeed or fail
// with a message naming the model or adapter, without crashing, hanging or allocating
// memory out of proportion to the file (the peak RSS is checked).
#include <sys/resource.h>

#include <chrono>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "engine/model/lora_adapter.h"
#include "engine/model/model_loader.h"
#include "engine/model/peft_writer.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/gguf_writer.h"
#include "tests/testing/hf_model_writer.h"
#include "tests/testing/tiny_gguf.h"

namespace crossreg {
namespace {

using ::testing::HasSubstr;

int64_t PeakRssMb() {
  struct rusage usage {};
  getrusage(RUSAGE_SELF, &usage);
  return usage.ru_maxrss / 1024;  // kilobytes on Linux
}

// Where and how a file is corrupted: every `stride` bytes below `dense_end` (headers,
// metadata, JSON), `sparse` evenly spaced offsets after it (tensor data).
struct SweepPlan {
  size_t stride = 1;
  size_t dense_end = std::string::npos;
  size_t sparse = 0;
};

// The i-th corruption of `bytes` at `offset`: the kinds take turns so that every region
// sees each of them.
std::string Corrupt(const std::string& bytes, size_t offset, size_t i) {
  std::string out = bytes;
  switch (i % 6) {
    case 0: return out.substr(0, offset);  // truncated
    case 1: out[offset] ^= 0x01; break;    // off by one (lengths, counts, digits)
    case 2: out[offset] ^= 0x80; break;    // high bit (sizes, UTF-8)
    case 3: out[offset] = '\xFF'; break;
    case 4: out[offset] = '\0'; break;
    default: out[offset] = static_cast<char>(out[offset] + 7); break;
  }
  return out;
}

struct SweepResult {
  int loaded = 0;
  int refused = 0;
};

// Rewrites `path` with each corruption of its bytes, loads, checks the outcome, and
// restores the file.
SweepResult Sweep(const std::string& path, const SweepPlan& plan,
                  const std::function<absl::Status()>& load, const std::string& must_name) {
  SweepResult result;
  auto original = testing::ReadBytes(path);
  EXPECT_TRUE(original.ok()) << path;
  if (!original.ok()) return result;
  std::vector<size_t> offsets;
  const size_t dense_end = std::min(plan.dense_end, original->size());
  for (size_t o = 0; o < dense_end; o += plan.stride) offsets.push_back(o);
  for (size_t k = 0; k < plan.sparse && dense_end < original->size(); ++k) {
    offsets.push_back(dense_end + (original->size() - dense_end) * k / plan.sparse);
  }
  for (size_t i = 0; i < offsets.size(); ++i) {
    EXPECT_TRUE(testing::WriteBytes(path, Corrupt(*original, offsets[i], i)).ok());
    const absl::Status status = load();
    if (status.ok()) {
      ++result.loaded;
      continue;
    }
    ++result.refused;
    EXPECT_THAT(std::string(status.message()), HasSubstr(must_name))
        << path << " corrupted at " << offsets[i] << " (kind " << i % 6 << ")";
  }
  EXPECT_TRUE(testing::WriteBytes(path, *original).ok());
  EXPECT_TRUE(load().ok()) << "restored " << path;
  return result;
}

class LoaderCorruptionSweepTest : public ::testing::Test {
 protected:
  void SetUp() override { rss_before_mb_ = PeakRssMb(); }
  void TearDown() override {
    // A corrupt size that reached an allocation would show here (files are < 100 KB).
    EXPECT_LT(PeakRssMb() - rss_before_mb_, 512) << "peak RSS grew during the sweep";
    std::filesystem::remove_all(dir_);
  }
  std::string Path(const std::string& name) const { return dir_ + "/" + name; }

  const std::string dir_ = testing::MakeTempDir("crossreg_sweep");
  int64_t rss_before_mb_ = 0;
};

TEST_F(LoaderCorruptionSweepTest, GgufModel) {
  for (testing::TinyVocab vocab : {testing::TinyVocab::kSentencePiece, testing::TinyVocab::kByteLevel}) {
    const std::string path = Path("tiny.gguf");
    const testing::GgufWriter w = testing::TinyLlamaGguf(vocab);
    ASSERT_TRUE(w.WriteFile(path).ok());
    // Metadata and tensor directory end before the first tensor's data.
    auto file = GgufFile::Open(path);
    ASSERT_TRUE(file.ok()) << file.status();
    const size_t data_start = static_cast<const unsigned char*>((*file)->tensors().front().ref.data) -
                              (*file)->mapping()->data();
    file->reset();
    const SweepResult r = Sweep(path, {.stride = 3, .dense_end = data_start, .sparse = 200},
                                [&] { return LoadModel(path).status(); }, path);
    EXPECT_GT(r.refused, 500);
  }
}

TEST_F(LoaderCorruptionSweepTest, HfDirectory) {
  const testing::GgufWriter w = testing::TinyLlamaGguf(testing::TinyVocab::kSentencePiece);
  ASSERT_TRUE(w.WriteFile(dir_ + ".gguf").ok());
  ASSERT_TRUE(testing::WriteHfModelFromGguf(dir_ + ".gguf", dir_, /*num_shards=*/2, DType::kBF16).ok());
  std::filesystem::remove(dir_ + ".gguf");
  const auto load = [&] { return LoadModel(dir_).status(); };
  ASSERT_TRUE(load().ok()) << load();
  struct FilePlan {
    const char* name;
    SweepPlan plan;
  };
  const FilePlan files[] = {
      {"config.json", {.stride = 1}},
      {"generation_config.json", {.stride = 1}},
      {"tokenizer.json", {.stride = 5}},
      {"model.safetensors.index.json", {.stride = 2}},
      {"model-00001-of-00002.safetensors", {.stride = 2, .dense_end = 1200, .sparse = 100}},
      {"model-00002-of-00002.safetensors", {.stride = 2, .dense_end = 1200, .sparse = 100}},
  };
  for (const FilePlan& f : files) {
    SCOPED_TRACE(f.name);
    const SweepResult r = Sweep(Path(f.name), f.plan, load, dir_);
    EXPECT_GT(r.refused, 0);
  }
}

TEST_F(LoaderCorruptionSweepTest, HfSingleSafetensorsFile) {
  const testing::GgufWriter w = testing::TinyLlamaGguf(testing::TinyVocab::kByteLevel);
  ASSERT_TRUE(w.WriteFile(dir_ + ".gguf").ok());
  ASSERT_TRUE(testing::WriteHfModelFromGguf(dir_ + ".gguf", dir_, /*num_shards=*/1, DType::kF32).ok());
  std::filesystem::remove(dir_ + ".gguf");
  const auto load = [&] { return LoadModel(dir_).status(); };
  ASSERT_TRUE(load().ok()) << load();
  const SweepResult tokenizer = Sweep(Path("tokenizer.json"), {.stride = 5}, load, dir_);
  EXPECT_GT(tokenizer.refused, 0);
  const SweepResult weights =
      Sweep(Path("model.safetensors"), {.stride = 2, .dense_end = 2400, .sparse = 100}, load, dir_);
  EXPECT_GT(weights.refused, 0);
}

TEST_F(LoaderCorruptionSweepTest, PeftAdapter) {
  ModelConfig base;
  base.vocab_size = 50;
  base.hidden_size = 16;
  base.intermediate_size = 24;
  base.num_layers = 2;
  base.num_heads = 4;
  base.num_kv_heads = 2;
  base.head_dim = 4;
  base.max_position = 64;
  base.bos_token_id = 1;
  base.eos_token_ids = {2};
  RandomLoraOptions options;
  options.rank = 2;
  options.placeholder_token_id = 49;
  options.window = 16;
  LoraAdapter adapter = *MakeRandomLoraAdapter(base, options);
  options.rank = 3;  // a second rank: rank_pattern and alpha_pattern entries
  adapter.layers[1].at(LoraTarget::kUp) = MakeRandomLoraAdapter(base, options)->layers[1].at(LoraTarget::kUp);
  ASSERT_TRUE(WritePeftAdapter(adapter, base, dir_, DType::kF16).ok());
  const auto load = [&] { return LoadLoraAdapter(dir_, base).status(); };
  ASSERT_TRUE(load().ok()) << load();
  const SweepResult config = Sweep(Path("adapter_config.json"), {.stride = 1}, load, dir_);
  EXPECT_GT(config.refused, 0);
  const SweepResult crossreg = Sweep(Path("crossreg_adapter.json"), {.stride = 1}, load, dir_);
  EXPECT_GT(crossreg.refused, 0);
  const SweepResult weights = Sweep(Path("adapter_model.safetensors"),
                                    {.stride = 1, .dense_end = 4000, .sparse = 200}, load, dir_);
  EXPECT_GT(weights.refused, 1000);
}

}  // namespace
}  // namespace crossreg
