// crossreg-distill-data's held-out split (FNV-1a-64 of the text, mod 10000) and the
// fallback that holds out the last document when the hash rule holds out none.
#include "distill/distill_split.h"

#include <string>

#include "gtest/gtest.h"

namespace crossreg {
namespace {

std::vector<CorpusDocument> Documents(int n) {
  std::vector<CorpusDocument> docs;
  for (int i = 0; i < n; ++i) docs.push_back({"doc" + std::to_string(i), "document number " + std::to_string(i)});
  return docs;
}

TEST(DistillSplitTest, Fnv1a64MatchesPublishedVectors) {
  EXPECT_EQ(Fnv1a64(""), 0xcbf29ce484222325ull);
  EXPECT_EQ(Fnv1a64("a"), 0xaf63dc4c8601ec8cull);
  EXPECT_EQ(Fnv1a64("foobar"), 0x85944171f73967e8ull);
}

TEST(DistillSplitTest, HashRuleHoldsOutWhatFallsBelowTheThreshold) {
  const std::vector<CorpusDocument> docs = Documents(2000);
  auto split = SplitDocuments(docs, 2.5);
  ASSERT_TRUE(split.ok()) << split.status();
  EXPECT_FALSE(split->last_document_held_out);
  EXPECT_EQ(split->train.size() + split->eval.size(), docs.size());
  for (size_t i : split->eval) EXPECT_LT(Fnv1a64(docs[i].text) % 10000, 250u) << docs[i].text;
  for (size_t i : split->train) EXPECT_GE(Fnv1a64(docs[i].text) % 10000, 250u) << docs[i].text;
  // About 2.5% of 2000 = 50.
  EXPECT_GT(split->eval.size(), 25u);
  EXPECT_LT(split->eval.size(), 90u);
  // Both lists keep corpus order.
  EXPECT_TRUE(std::is_sorted(split->train.begin(), split->train.end()));
  EXPECT_TRUE(std::is_sorted(split->eval.begin(), split->eval.end()));
  // Percentages are compared in hundredths: 0.01% holds out residue 0 only.
  EXPECT_EQ(InHeldOutSplit("a", 100.0), true);
  EXPECT_EQ(InHeldOutSplit("a", (Fnv1a64("a") % 10000) / 100.0), false);
  EXPECT_EQ(InHeldOutSplit("a", (Fnv1a64("a") % 10000 + 1) / 100.0), true);
}

TEST(DistillSplitTest, NothingHeldOutByHashHoldsOutTheLastDocument) {
  // Find three documents the hash keeps in train at 2.5%.
  std::vector<CorpusDocument> docs;
  for (int i = 0; docs.size() < 3; ++i) {
    const std::string text = "text " + std::to_string(i);
    if (!InHeldOutSplit(text, 2.5)) docs.push_back({"d", text});
  }
  auto split = SplitDocuments(docs, 2.5);
  ASSERT_TRUE(split.ok()) << split.status();
  EXPECT_TRUE(split->last_document_held_out);
  EXPECT_EQ(split->train, (std::vector<size_t>{0, 1}));
  EXPECT_EQ(split->eval, (std::vector<size_t>{2}));

  auto none = SplitDocuments(docs, 0.0);  // 0%: no fallback, eval stays empty
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_FALSE(none->last_document_held_out);
  EXPECT_EQ(none->train.size(), 3u);
  EXPECT_TRUE(none->eval.empty());
}

TEST(DistillSplitTest, EmptyTrainSplitIsAnErrorNamingTheFlag) {
  auto one = SplitDocuments({{"only", "the only document"}}, 2.5);
  ASSERT_FALSE(one.ok());
  EXPECT_NE(one.status().message().find("--holdout_pct"), std::string::npos) << one.status();
  auto all = SplitDocuments(Documents(5), 100.0);
  ASSERT_FALSE(all.ok());
  EXPECT_NE(all.status().message().find("no document for the train split"), std::string::npos) << all.status();
  auto bad = SplitDocuments(Documents(5), -1.0);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("--holdout_pct must be in [0, 100]"), std::string::npos) << bad.status();
  EXPECT_FALSE(SplitDocuments({}, 2.5).ok());
}

}  // namespace
}  // namespace crossreg
