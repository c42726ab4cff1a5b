// Grammar masks and the scheduler: masks a step cannot compute within its inline
// budget go to the mask worker while the sequence needing them sits forwards out
// (scheduler/mask_worker.h), without changing any output; and a grammar that cannot
// be followed (no token legal, or a mask over its budget) ends its request with an
// error instead of letting it continue unconstrained.
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "engine/grammar/grammar_constraint.h"
#include "engine/grammar/grammar_matcher.h"
#include "gtest/gtest.h"
#include "scheduler/scheduler.h"
#include "tests/scheduler/event_recorder.h"
#include "tests/scheduler/fake_backend.h"

namespace crossreg {
namespace {

using std::chrono::milliseconds;
using testing::EventRecorder;
using testing::FakeBackend;
using testing::FakeGreedyContinuation;
using testing::FakeModelConfig;

constexpr int kMaskVocab = 32;

// Token i spells one character: 'a' + i for the first 26, then '0' .. '5'.
std::shared_ptr<const grammar::GrammarVocabulary> LetterVocabulary() {
  std::vector<std::string> pieces;
  for (int i = 0; i < kMaskVocab; ++i) pieces.push_back(std::string(1, i < 26 ? static_cast<char>('a' + i) : static_cast<char>('0' + i - 26)));
  return std::make_shared<const grammar::GrammarVocabulary>(pieces, std::vector<int32_t>{});
}

std::string Spell(const std::vector<int32_t>& tokens) {
  std::string text;
  for (int32_t t : tokens) text += t < 26 ? static_cast<char>('a' + t) : static_cast<char>('0' + t - 26);
  return text;
}

GenerationRequest Spec(const std::string& id, std::vector<int32_t> prompt, int max_new, DecodingMode mode) {
  GenerationRequest s;
  s.request_id = id;
  s.prompt_ids = std::move(prompt);
  s.max_new_tokens = max_new;
  s.decoding.mode = mode;
  s.decoding.gamma = 4;
  s.stop_at_eos = false;
  return s;
}

struct Rig {
  explicit Rig(SchedulerOptions options = {})
      : config(FakeModelConfig(kMaskVocab)), backend(config, {4, 256}), kv(KvCacheConfig{4, 256}) {
    options.decoding.has_adapter = true;
    scheduler = std::make_unique<Scheduler>(options, backend, kv);
  }
  ModelConfig config;
  FakeBackend backend;
  PagedKvCache kv;
  std::unique_ptr<Scheduler> scheduler;
};

struct PairRun {
  std::vector<int32_t> constrained, other;
  int64_t forwards = 0;
};

// A constrained request and an unconstrained one, together, with `inline_work` of
// mask work per step on the scheduler's thread.
PairRun RunPair(int64_t inline_work, DecodingMode mode, const std::string& gbnf) {
  SchedulerOptions options;
  options.inline_mask_work = inline_work;
  Rig rig(options);
  auto constraint = grammar::MakeGrammarConstraint(gbnf, "grammar", LetterVocabulary());
  EXPECT_TRUE(constraint.ok()) << constraint.status();
  GenerationRequest constrained = Spec("constrained", {1, 2, 3}, 24, mode);
  constrained.grammar = *constraint;
  EventRecorder rec;
  EXPECT_TRUE(rig.scheduler->Submit(constrained, rec.HandlerFor("constrained")).ok());
  EXPECT_TRUE(rig.scheduler->Submit(Spec("other", {4, 5}, 24, mode), rec.HandlerFor("other")).ok());
  rig.scheduler->Start();
  EXPECT_TRUE(rec.WaitForFinals(2));
  PairRun run;
  for (const char* id : {"constrained", "other"}) {
    const auto r = rec.Get(id);
    EXPECT_EQ(r.final_event->kind, RequestEvent::Kind::kFinished) << id << ": " << r.final_event->error;
  }
  run.constrained = rec.Get("constrained").tokens;
  run.other = rec.Get("other").tokens;
  run.forwards = rig.backend.forwards();
  rig.scheduler->Shutdown(milliseconds(1000));
  return run;
}

TEST(GrammarMasksTest, MasksLeftToTheWorkerChangeNoOutputAndHoldNoOneElseUp) {
  // Letters and digits alternate in pairs: new grammar states keep coming for a while.
  const std::string gbnf = R"(root ::= ([a-m] [a-m] [0-5] [0-5])+)";
  for (DecodingMode mode : {DecodingMode::kAutoregressive, DecodingMode::kNgram, DecodingMode::kLossless}) {
    SCOPED_TRACE(DecodingModeName(mode));
    const PairRun inline_masks = RunPair(grammar::kInlineMaskWorkPerStep, mode, gbnf);
    const PairRun worker_masks = RunPair(0, mode, gbnf);
    EXPECT_EQ(worker_masks.constrained, inline_masks.constrained);
    EXPECT_EQ(inline_masks.other, FakeGreedyContinuation({4, 5}, 24, kMaskVocab));
    EXPECT_EQ(worker_masks.other, FakeGreedyContinuation({4, 5}, 24, kMaskVocab));
    // The text is a prefix of a sentence of the grammar.
    grammar::GrammarMatcher matcher(grammar::MakeGrammarConstraint(gbnf, "grammar", LetterVocabulary()).value()->grammar);
    EXPECT_TRUE(matcher.AcceptBytes(Spell(worker_masks.constrained))) << Spell(worker_masks.constrained);
    // The constrained sequence may sit forwards out while the worker computes its masks,
    // and the other one's forwards go on without it; never fewer forwards than with the
    // masks inline. (How many it sits out is a race with the worker: on a loaded host
    // under TSan the worker has kept up with every step.)
    EXPECT_GE(worker_masks.forwards, inline_masks.forwards);
  }
}

TEST(GrammarMasksTest, AGrammarThatCannotBeFollowedEndsTheRequestWithAnError) {
  // "ab", then a character no token spells: two legal tokens, then none.
  auto constraint = grammar::MakeGrammarConstraint(R"(root ::= "ab" "\u00e9")", "grammar", LetterVocabulary());
  ASSERT_TRUE(constraint.ok()) << constraint.status();
  for (DecodingMode mode : {DecodingMode::kAutoregressive, DecodingMode::kNgram, DecodingMode::kLossless}) {
    SCOPED_TRACE(DecodingModeName(mode));
    Rig rig;
    GenerationRequest r = Spec("dead-end", {1, 2, 3}, 16, mode);
    r.grammar = *constraint;
    EventRecorder rec;
    ASSERT_TRUE(rig.scheduler->Submit(r, rec.HandlerFor("dead-end")).ok());
    rig.scheduler->Start();
    ASSERT_TRUE(rec.WaitForFinal("dead-end"));
    const auto got = rec.Get("dead-end");
    ASSERT_EQ(got.final_event->kind, RequestEvent::Kind::kError);
    EXPECT_EQ(got.final_event->error.code(), absl::StatusCode::kFailedPrecondition) << got.final_event->error;
    EXPECT_TRUE(absl::StrContains(got.final_event->error.message(), "grammar: no token can continue"))
        << got.final_event->error;
    // What was committed before the dead end is the grammar's, nothing after it (a
    // speculative step that reaches the dead end commits none of its tokens).
    EXPECT_TRUE(absl::StartsWith("ab", Spell(got.tokens))) << Spell(got.tokens);
    if (mode == DecodingMode::kAutoregressive) {
      EXPECT_EQ(Spell(got.tokens), "ab");
    }
    rig.scheduler->Shutdown(milliseconds(1000));
    EXPECT_EQ(rig.kv.Stats().used_blocks, 0);
  }
}

}  // namespace
}  // namespace crossreg
