// The corpus n-gram table: lookup of the longest known suffix, the file image round
// trip, every malformed file refused with its problem named, and the drafter's order
// (the context's 2+ token matches, then the table, then the context's 1-token match).
#include "engine/decoding/ngram_table.h"

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <vector>

#include "engine/decoding/ngram_drafter.h"
#include "gtest/gtest.h"

namespace crossreg {
namespace {

constexpr int kBits = 5;  // vocabulary of 32
uint64_t Pack(std::initializer_list<uint32_t> tokens) {
  uint64_t key = 0;
  for (uint32_t t : tokens) key = (key << kBits) | t;
  return key;
}

// Order 2: "1 2" -> 3, "4 5" -> 6; order 3: "0 1 2" -> 9.
std::unique_ptr<NgramTable> SmallTable() {
  std::vector<NgramTable::Order> orders(3);
  orders[1].keys = {Pack({1, 2}), Pack({4, 5})};
  orders[1].next = {3, 6};
  orders[2].keys = {Pack({0, 1, 2})};
  orders[2].next = {9};
  auto table = NgramTable::FromOrders(32, kBits, std::move(orders));
  EXPECT_TRUE(table.ok()) << table.status();
  return table.ok() ? std::move(*table) : nullptr;
}

TEST(NgramTableTest, LongestKnownSuffixWins) {
  auto table = SmallTable();
  ASSERT_NE(table, nullptr);
  int n = -1;
  const std::vector<int32_t> a = {7, 0, 1, 2};
  EXPECT_EQ(table->Next(a.data(), 4, 2, &n), 9);
  EXPECT_EQ(n, 3);
  const std::vector<int32_t> b = {7, 8, 1, 2};
  EXPECT_EQ(table->Next(b.data(), 4, 2, &n), 3);
  EXPECT_EQ(n, 2);
  const std::vector<int32_t> c = {1, 2, 8};
  EXPECT_EQ(table->Next(c.data(), 3, 2, &n), -1);
  EXPECT_EQ(n, 0);
  const std::vector<int32_t> out_of_vocab = {1, 40, 2};  // never matches, never faults
  EXPECT_EQ(table->Next(out_of_vocab.data(), 3, 1, &n), -1);
  EXPECT_EQ(table->entries(), 3);
  EXPECT_EQ(table->max_n(), 3);
}

TEST(NgramTableTest, FileRoundTripAndEveryDefectNamed) {
  auto table = SmallTable();
  ASSERT_NE(table, nullptr);
  const std::string good = table->Serialize();
  const std::string path = (std::filesystem::temp_directory_path() / "crossreg_ngram_table_test.bin").string();
  auto write = [&](const std::string& bytes) {
    std::ofstream(path, std::ios::binary | std::ios::trunc).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  };
  write(good);
  auto loaded = NgramTable::Load(path, 32);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ((*loaded)->Serialize(), good);
  const std::vector<int32_t> ctx = {4, 5};
  EXPECT_EQ((*loaded)->Next(ctx.data(), 2), 6);

  auto error_of = [&](const std::string& bytes, int64_t vocab = 32) {
    write(bytes);
    auto t = NgramTable::Load(path, vocab);
    EXPECT_FALSE(t.ok());
    return t.ok() ? std::string() : std::string(t.status().message());
  };
  EXPECT_NE(error_of(good, 64).find("vocabulary of 32 tokens; the model has 64"), std::string::npos);
  EXPECT_NE(error_of("XXXXXXXX" + good.substr(8)).find("bad magic"), std::string::npos);
  EXPECT_NE(error_of(good.substr(0, 12)).find("truncated header"), std::string::npos);
  EXPECT_NE(error_of(good.substr(0, good.size() - 1)).find("truncated"), std::string::npos);
  EXPECT_NE(error_of(good + "x").find("bytes after the last entry"), std::string::npos);
  std::string bad_version = good;
  bad_version[8] = 9;
  EXPECT_NE(error_of(bad_version).find("version 9"), std::string::npos);
  // Order 2's keys start after the header (8 + 16 + 3 * 8 bytes) and order 1 (empty):
  // swap its two keys so that they are out of order.
  std::string unsorted = good;
  const size_t keys2 = 8 + 16 + 24;
  std::swap_ranges(unsorted.begin() + keys2, unsorted.begin() + keys2 + 8, unsorted.begin() + keys2 + 8);
  EXPECT_NE(error_of(unsorted).find("not strictly increasing"), std::string::npos);
  // A next token outside the vocabulary.
  std::string bad_next = good;
  bad_next[keys2 + 16] = 40;
  EXPECT_NE(error_of(bad_next).find("outside the vocabulary"), std::string::npos);
  EXPECT_EQ(NgramTable::Load(path + ".missing", 32).status().code(), absl::StatusCode::kNotFound);
  std::remove(path.c_str());
}

TEST(NgramTableTest, FromOrdersChecksItsShape) {
  std::vector<NgramTable::Order> too_wide(3);
  EXPECT_FALSE(NgramTable::FromOrders(1 << 22, 22, std::move(too_wide)).ok());  // 66 bits
  std::vector<NgramTable::Order> small_bits(2);
  EXPECT_FALSE(NgramTable::FromOrders(100, 5, std::move(small_bits)).ok());  // 100 ids in 5 bits
  std::vector<NgramTable::Order> mismatched(2);
  mismatched[1].keys = {1};
  EXPECT_FALSE(NgramTable::FromOrders(32, kBits, std::move(mismatched)).ok());
}

TEST(NgramTableTest, DrafterUsesContextMatchesFirstThenTheTableThenOneTokenMatches) {
  auto table = SmallTable();
  ASSERT_NE(table, nullptr);
  NgramIndex index(3);
  int match = 0;
  bool from_table = true;
  // The context's own "1 2" was followed by 7: that beats the table's 3.
  const std::vector<int32_t> repeats = {1, 2, 7, 1, 2};
  index.Update(repeats);
  EXPECT_EQ(index.Draft(repeats, 1, &match, table.get(), &from_table), (std::vector<int32_t>{7}));
  EXPECT_EQ(match, 2);
  EXPECT_FALSE(from_table);
  // No 2-token match in the context ("4 5" is new), but the table knows it: 6; then "5 6"
  // is unknown to both, and the context's 1-token match "6"... is absent, so it stops.
  NgramIndex fresh(3);
  const std::vector<int32_t> novel = {8, 4, 5};
  fresh.Update(novel);
  EXPECT_EQ(fresh.Draft(novel, 4, &match, table.get(), &from_table), (std::vector<int32_t>{6}));
  EXPECT_EQ(match, 2);
  EXPECT_TRUE(from_table);
  // A 1-token context match ("5" followed by 11) yields to the table's 2-token one.
  NgramIndex one(3);
  const std::vector<int32_t> ones = {5, 11, 4, 5};
  one.Update(ones);
  EXPECT_EQ(one.Draft(ones, 1, &match, table.get()), (std::vector<int32_t>{6}));
  // Without the table, the 1-token match drafts what followed it in the context.
  EXPECT_EQ(one.Draft(ones, 1, &match, nullptr, &from_table), (std::vector<int32_t>{11}));
  EXPECT_EQ(match, 1);
  EXPECT_FALSE(from_table);
  // The table chains through its own drafts: "0 1 2" -> 9 only at its start.
  NgramIndex chain(3);
  const std::vector<int32_t> start = {0, 1};
  chain.Update(start);
  std::vector<NgramTable::Order> orders(2);
  orders[1].keys = {Pack({0, 1}), Pack({1, 2}), Pack({2, 3})};
  orders[1].next = {2, 3, 4};
  auto chained = NgramTable::FromOrders(32, kBits, std::move(orders));
  ASSERT_TRUE(chained.ok());
  EXPECT_EQ(chain.Draft(start, 5, &match, chained->get()), (std::vector<int32_t>{2, 3, 4}));
}

// The adaptive draft length files drafts by source and length: the context's matches
// 1..ngram_max (longer ones clamped), then the table's, apart from them.
TEST(NgramTableTest, MatchClassesKeepTheContextAndTheTableApart) {
  EXPECT_EQ(NgramMatchClass(0, false, 3), 0);
  EXPECT_EQ(NgramMatchClass(0, true, 3), 0);
  EXPECT_EQ(NgramMatchClass(1, false, 3), 1);
  EXPECT_EQ(NgramMatchClass(3, false, 3), 3);
  EXPECT_EQ(NgramMatchClass(5, false, 3), 3);
  EXPECT_EQ(NgramMatchClass(2, true, 3), 5);
  EXPECT_EQ(NgramMatchClass(3, true, 3), 6);
  EXPECT_EQ(NgramMatchClass(40, true, 3), NgramMatchClasses(3));
  EXPECT_EQ(NgramMatchClass(2, true, 6), 8);
}

}  // namespace
}  // namespace crossreg
