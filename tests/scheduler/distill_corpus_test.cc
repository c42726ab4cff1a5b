// crossreg-distill-data's corpus (--prompts): JSONL lines, whole files, directories,
// and errors that name the file and line.
#include "distill/distill_corpus.h"

#include "gtest/gtest.h"
#include "tests/scheduler/scratch_dir.h"

namespace crossreg {
namespace {

using testing::ScratchDir;

TEST(DistillCorpusTest, JsonlLinesTakeTextElsePromptAndSkipBlankLines) {
  ScratchDir dir("distill_corpus");
  const std::string jsonl = dir.Write("a.jsonl",
                                      "{\"text\": \"first\", \"prompt\": \"not this\"}\n"
                                      "\n"
                                      "{\"prompt\": \"second\", \"text\": 3}\r\n"
                                      "   \n"
                                      "{\"text\": \"third\\nline\"}");
  const std::string plain = dir.Write("b.md", "# whole file\n{\"text\": \"not a line\"}\n");
  auto docs = ReadCorpus({jsonl, plain});
  ASSERT_TRUE(docs.ok()) << docs.status();
  ASSERT_EQ(docs->size(), 4u);
  EXPECT_EQ((*docs)[0].text, "first");
  EXPECT_EQ((*docs)[0].origin, jsonl + ":1");
  EXPECT_EQ((*docs)[1].text, "second");
  EXPECT_EQ((*docs)[1].origin, jsonl + ":3");
  EXPECT_EQ((*docs)[2].text, "third\nline");
  EXPECT_EQ((*docs)[3].text, "# whole file\n{\"text\": \"not a line\"}\n");
  EXPECT_EQ((*docs)[3].origin, plain);
}

TEST(DistillCorpusTest, BadJsonlLinesNameFileAndLine) {
  ScratchDir dir("distill_corpus");
  const std::string not_json = dir.Write("bad.jsonl", "{\"text\": \"ok\"}\n{\"text\": \"unterminated}\n");
  auto docs = ReadCorpus({not_json});
  ASSERT_FALSE(docs.ok());
  EXPECT_EQ(docs.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(docs.status().message().find("--prompts: " + not_json + ":2: not a JSON value"), std::string::npos)
      << docs.status();

  const std::string no_field = dir.Write("nofield.jsonl", "{\"text\": \"ok\"}\n\n{\"body\": \"x\"}\n");
  docs = ReadCorpus({no_field});
  ASSERT_FALSE(docs.ok());
  EXPECT_NE(docs.status().message().find(no_field + ":3: has neither"), std::string::npos) << docs.status();

  const std::string array = dir.Write("array.jsonl", "[\"text\"]\n");
  docs = ReadCorpus({array});
  ASSERT_FALSE(docs.ok());
  EXPECT_NE(docs.status().message().find(array + ":1: not a JSON object"), std::string::npos) << docs.status();

  docs = ReadCorpus({dir.Path("missing.txt")});
  ASSERT_FALSE(docs.ok());
  EXPECT_NE(docs.status().message().find("missing.txt: no such file"), std::string::npos) << docs.status();
}

TEST(DistillCorpusTest, DirectoryIsEveryVisibleFileSortedByPathJsonlLinesEachOneDocument) {
  ScratchDir dir("distill_corpus");
  dir.Write("tree/b.py", "b");
  dir.Write("tree/a/z.py", "a/z");
  dir.Write("tree/a/c.jsonl", "{\"text\": \"first\"}\n{\"prompt\": \"second\"}\n");
  dir.Write("tree/.hidden", "hidden");
  dir.Write("tree/.git/config", "hidden too");
  auto docs = ReadCorpus({dir.Path("tree")});
  ASSERT_TRUE(docs.ok()) << docs.status();
  ASSERT_EQ(docs->size(), 4u);
  EXPECT_EQ((*docs)[0].origin, dir.Path("tree/a/c.jsonl") + ":1");
  EXPECT_EQ((*docs)[0].text, "first");
  EXPECT_EQ((*docs)[1].text, "second");
  EXPECT_EQ((*docs)[2].text, "a/z");
  EXPECT_EQ((*docs)[3].text, "b");
}

}  // namespace
}  // namespace crossreg
