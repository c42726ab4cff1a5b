// crossreg-distill-data end to end on stories260K, without the binary: every
// continuation the scheduler batched is what plain greedy AR decoding (Generate) gives
// for its prefix alone, the streams are BOS + text + EOS per document, and the file
// reads back as written.
#include "distill/distill_data_builder.h"

#include <mutex>
#include <set>

#include "scheduler/generate.h"
#include "gtest/gtest.h"
#include "tests/scheduler/scratch_dir.h"
#include "tests/testing/test_paths.h"

namespace crossreg {
namespace {

using testing::ScratchDir;

class DistillDataBuilderTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    EngineOptions options;
    options.model_path = testing::Stories260KGguf();
    options.backend = BackendChoice::kCpu;
    options.cpu_threads = 1;
    options.kv_memory_bytes = int64_t{8} << 20;
    auto engine = OpenEngine(options);
    ASSERT_TRUE(engine.ok()) << engine.status();
    engine_ = engine->release();
  }
  static void TearDownTestSuite() {
    delete engine_;
    engine_ = nullptr;
  }
  static Engine* engine_;
};
Engine* DistillDataBuilderTest::engine_ = nullptr;

// Three documents in two files; with --holdout_pct 2.5 none of them hashes into eval,
// so the last one is held out.
DistillDataOptions SmallRun(const ScratchDir& dir) {
  DistillDataOptions o;
  o.sources = {dir.Write("stories.jsonl",
                         "{\"text\": \"Once upon a time, there was a little girl named Lily. She loved to play "
                         "outside in the sun with her big red ball.\"}\n"
                         "{\"prompt\": \"Tom and his dog went to the park. They saw a bird in a tree and ran to "
                         "see it.\"}\n"),
               dir.Write("third.txt", "The cat sat on the mat. It was a sunny day and the cat was happy.")};
  o.examples = 12;
  o.eval_examples = 3;
  o.prefix_min = 4;
  o.prefix_max = 40;
  o.window = 4;
  o.seed = 5;
  o.max_running = 3;  // a sliding window of 11 requests over 12: submissions wait for completions
  o.max_batch_tokens = 64;
  return o;
}

TEST_F(DistillDataBuilderTest, ContinuationsAreGreedyArDecodingOfEachPrefix) {
  ScratchDir dir("distill_builder");
  const DistillDataOptions options = SmallRun(dir);
  auto corpus = LoadDistillCorpus(options);
  ASSERT_TRUE(corpus.ok()) << corpus.status();
  ASSERT_EQ(corpus->documents.size(), 3u);
  ASSERT_TRUE(corpus->split.last_document_held_out);

  std::mutex mu;
  std::vector<std::string> notes;
  std::set<std::string> progressed;
  DistillDataObserver observer;
  observer.on_note = [&](const std::string& note) {
    std::lock_guard<std::mutex> lock(mu);
    notes.push_back(note);
  };
  observer.on_progress = [&](const std::string& split, const ContinuationProgress& p) {
    std::lock_guard<std::mutex> lock(mu);
    if (p.done == p.total) progressed.insert(split);
  };
  auto data = MakeDistillData(options, *corpus, *engine_, observer);
  ASSERT_TRUE(data.ok()) << data.status();
  EXPECT_EQ(progressed, (std::set<std::string>{"train", "eval"}));
  EXPECT_FALSE(notes.empty());

  const Model& model = *engine_->model;
  const Tokenizer& tok = *model.tokenizer;
  ASSERT_GE(tok.bos_id(), 0);
  ASSERT_GE(tok.eos_id(), 0);
  // Streams: BOS + Encode(text) + EOS per document, in order.
  std::vector<int32_t> train_stream;
  for (size_t i : {0, 1}) {
    train_stream.push_back(tok.bos_id());
    const auto ids = tok.Encode(corpus->documents[i].text, false);
    train_stream.insert(train_stream.end(), ids.begin(), ids.end());
    train_stream.push_back(tok.eos_id());
  }
  EXPECT_EQ(data->train.stream, train_stream);
  EXPECT_EQ(data->train.documents, 2);
  EXPECT_EQ(data->eval.documents, 1);
  EXPECT_EQ(data->eval.stream.front(), tok.bos_id());
  EXPECT_EQ(data->eval.stream.back(), tok.eos_id());
  EXPECT_EQ(data->header.bos_id, tok.bos_id());
  EXPECT_EQ(data->header.eos_id, tok.eos_id());
  EXPECT_EQ(data->header.model, testing::Stories260KGguf());
  EXPECT_EQ(data->header.vocab_size, model.config.vocab_size);
  EXPECT_EQ(data->header.window, 4);
  EXPECT_EQ(data->header.prefix_max, 40);
  EXPECT_EQ(data->header.temperature, 0);
  EXPECT_EQ(data->header.backend, engine_->BackendDescription());

  // Every continuation against Generate's greedy AR decoding of its prefix alone.
  int compared = 0;
  for (const DistillSplitData* split : {&data->train, &data->eval}) {
    const int64_t n = split->examples();
    ASSERT_EQ(n, split == &data->train ? 12 : 3);
    ASSERT_EQ(static_cast<int64_t>(split->continuation.size()), n * 4);
    for (int64_t i = 0; i < n; ++i) {
      SCOPED_TRACE(::testing::Message() << (split == &data->train ? "train" : "eval") << " example " << i);
      ASSERT_GE(split->length[i], 4);
      ASSERT_LE(split->start[i] + split->length[i], static_cast<int64_t>(split->stream.size()));
      GenerationRequest request;
      request.prompt_ids.assign(split->stream.begin() + split->start[i],
                                split->stream.begin() + split->start[i] + split->length[i]);
      request.max_new_tokens = 4;
      request.stop_at_eos = false;
      auto alone = Generate(*engine_->backend, *engine_->kv, request, engine_->Environment());
      ASSERT_TRUE(alone.ok()) << alone.status();
      const std::vector<int32_t> batched(split->continuation.begin() + i * 4, split->continuation.begin() + (i + 1) * 4);
      EXPECT_EQ(batched, alone->ids);
      ++compared;
    }
  }
  EXPECT_EQ(compared, 15);

  // Written and read back unchanged.
  const std::string path = dir.Path("out.bin");
  ASSERT_TRUE(WriteDistillDataFile(path, *data).ok());
  auto read = ReadDistillDataFile(path);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(read->header.sources, options.sources);
  EXPECT_EQ(read->header.seed, 5u);
  for (auto [written, back] : {std::pair{&data->train, &read->train}, std::pair{&data->eval, &read->eval}}) {
    EXPECT_EQ(back->documents, written->documents);
    EXPECT_EQ(back->stream, written->stream);
    EXPECT_EQ(back->start, written->start);
    EXPECT_EQ(back->length, written->length);
    EXPECT_EQ(back->continuation, written->continuation);
  }
}

TEST_F(DistillDataBuilderTest, SameSeedSameDataAndEvalUsesTheNextSeed) {
  ScratchDir dir("distill_builder");
  DistillDataOptions options = SmallRun(dir);
  options.max_running = 64;
  auto corpus = LoadDistillCorpus(options);
  ASSERT_TRUE(corpus.ok()) << corpus.status();
  auto a = MakeDistillData(options, *corpus, *engine_);
  auto b = MakeDistillData(options, *corpus, *engine_);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->train.start, b->train.start);
  EXPECT_EQ(a->train.continuation, b->train.continuation);
  EXPECT_EQ(a->eval.continuation, b->eval.continuation);
  auto train = SamplePrefixes(static_cast<int64_t>(a->train.stream.size()), 12, 4, 40, 5);
  auto eval = SamplePrefixes(static_cast<int64_t>(a->eval.stream.size()), 3, 4, 40, 6);
  ASSERT_TRUE(train.ok() && eval.ok());
  EXPECT_EQ(a->train.start, train->start);
  EXPECT_EQ(a->train.length, train->length);
  EXPECT_EQ(a->eval.start, eval->start);
  EXPECT_EQ(a->eval.length, eval->length);
}

TEST_F(DistillDataBuilderTest, BadValuesNameTheirFlag) {
  ScratchDir dir("distill_builder");
  const DistillDataOptions good = SmallRun(dir);
  auto corpus = LoadDistillCorpus(good);
  ASSERT_TRUE(corpus.ok()) << corpus.status();
  auto message_of = [&](DistillDataOptions o) {
    auto r = MakeDistillData(o, *corpus, *engine_);
    EXPECT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
    return std::string(r.status().message());
  };
  DistillDataOptions o = good;
  o.window = 1;
  EXPECT_NE(message_of(o).find("--window"), std::string::npos);
  o = good;
  o.prefix_min = 1;
  EXPECT_NE(message_of(o).find("--prefix_min"), std::string::npos);
  o = good;
  o.prefix_max = 3;
  EXPECT_NE(message_of(o).find("--prefix_max"), std::string::npos);
  o = good;
  o.prefix_min = 200;  // longer than the train stream
  o.prefix_max = 300;
  EXPECT_NE(message_of(o).find("--prefix_min 200: the train split"), std::string::npos);
  o = good;
  o.prefix_min = engine_->model->config.max_position - 2;  // plus the window exceeds the context
  o.prefix_max = engine_->model->config.max_position;
  EXPECT_NE(message_of(o).find("exceed the model's context"), std::string::npos);
  o = good;
  o.holdout_pct = 0;
  EXPECT_NE(message_of(o).find("--eval_examples"), std::string::npos);
  o = good;
  o.examples = 0;
  EXPECT_NE(message_of(o).find("--examples"), std::string::npos);
  o = good;
  o.sources.clear();
  EXPECT_NE(message_of(o).find("--prompts"), std::string::npos);
}

// A KV cache of 32 positions: a prefix that can never fit names --kv_memory_mb; ones
// that fit alone but not together wait for blocks (or are preempted and recomputed)
// and come out with the same tokens as in a roomy cache.
TEST_F(DistillDataBuilderTest, SmallKvCacheRefusesWhatCannotFitAndPreemptsTheRest) {
  EngineOptions engine_options;
  engine_options.model_path = testing::Stories260KGguf();
  engine_options.backend = BackendChoice::kCpu;
  engine_options.cpu_threads = 1;
  engine_options.kv_block_size = 4;
  engine_options.kv_blocks = 8;
  auto small = OpenEngine(engine_options);
  ASSERT_TRUE(small.ok()) << small.status();

  ScratchDir dir("distill_builder");
  DistillDataOptions options = SmallRun(dir);
  auto corpus = LoadDistillCorpus(options);
  ASSERT_TRUE(corpus.ok()) << corpus.status();
  auto refused = MakeDistillData(options, *corpus, **small);  // prefixes up to 40 + 4 + 1 > 32
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(refused.status().message().find("--kv_memory_mb"), std::string::npos) << refused.status();

  options.prefix_max = 20;
  options.max_running = 4;
  auto squeezed = MakeDistillData(options, *corpus, **small);
  ASSERT_TRUE(squeezed.ok()) << squeezed.status();
  auto roomy = MakeDistillData(options, *corpus, *engine_);
  ASSERT_TRUE(roomy.ok()) << roomy.status();
  EXPECT_EQ(squeezed->train.start, roomy->train.start);
  EXPECT_EQ(squeezed->train.continuation, roomy->train.continuation);
  EXPECT_EQ(squeezed->eval.continuation, roomy->eval.continuation);
}

}  // namespace
}  // namespace crossreg

namespace crossreg {
namespace {

// Nested prefixes of one text, on an engine that caches prompt blocks: the rest of a run
// is submitted after its longest prefix has its first token, so they reuse its blocks;
// the continuations are still greedy AR of each prefix alone, and the file says K.
TEST(DistillDataGroupedTest, RunsShareAStartReuseCachedBlocksAndStayGreedy) {
  EngineOptions engine_options;
  engine_options.model_path = testing::Stories260KGguf();
  engine_options.backend = BackendChoice::kCpu;
  engine_options.cpu_threads = 1;
  engine_options.kv_memory_bytes = int64_t{8} << 20;
  engine_options.prefix_caching = true;
  auto engine = OpenEngine(engine_options);
  ASSERT_TRUE(engine.ok()) << engine.status();
  ScratchDir dir("distill_grouped");
  DistillDataOptions options = SmallRun(dir);
  options.prefix_min = 20;  // every prefix holds a full 16-token block
  options.windows_per_prefix = 3;
  auto corpus = LoadDistillCorpus(options);
  ASSERT_TRUE(corpus.ok()) << corpus.status();
  auto data = MakeDistillData(options, *corpus, **engine);
  ASSERT_TRUE(data.ok()) << data.status();
  EXPECT_EQ(data->header.windows_per_prefix, 3);
  const DistillSplitData& train = data->train;
  ASSERT_EQ(train.examples(), 12);
  for (int64_t i = 0; i < 12; ++i) {
    SCOPED_TRACE(::testing::Message() << "train example " << i);
    EXPECT_EQ(train.start[i], train.start[i - i % 3]);
    if (i % 3 != 0) {
      EXPECT_LE(train.length[i], train.length[i - 1]);  // longest first
    }
    GenerationRequest request;
    request.prompt_ids.assign(train.stream.begin() + train.start[i],
                              train.stream.begin() + train.start[i] + train.length[i]);
    request.max_new_tokens = 4;
    request.stop_at_eos = false;
    Engine& e = **engine;
    auto alone = Generate(*e.backend, *e.kv, request, e.Environment());
    ASSERT_TRUE(alone.ok()) << alone.status();
    EXPECT_EQ(std::vector<int32_t>(train.continuation.begin() + i * 4, train.continuation.begin() + (i + 1) * 4),
              alone->ids);
  }
  // Each of the 4 runs' 2 followers finds at least the one full block of the leader.
  EXPECT_GE(data->prompt_tokens_cached, 4 * 2 * 16);
  const std::string path = dir.Path("grouped.bin");
  ASSERT_TRUE(WriteDistillDataFile(path, *data).ok());
  auto read = ReadDistillDataFile(path);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(read->header.windows_per_prefix, 3);

  DistillData broken = *data;
  broken.train.start[4] += 1;
  EXPECT_EQ(WriteDistillDataFile(dir.Path("broken.bin"), broken).message(),
            "train example 4 does not share its group's start");
  options.windows_per_prefix = 5;  // 12 examples are not runs of 5
  EXPECT_EQ(MakeDistillData(options, *corpus, **engine).status().message(),
            "--windows_per_prefix 5 must be >= 1 and divide --examples 12");
}

}  // namespace
}  // namespace crossreg
