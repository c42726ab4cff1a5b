// JSON Schema to GBNF: every schema in tests/testdata/json_schemas converts, parses as
// GBNF, and its grammar accepts hand-written valid documents (compacted, and as the JSON
// library prints them; pretty-printed ones are refused) and rejects invalid ones,
// with the independent validator in tests/testing agreeing on each; then the keywords one at a time (integer ranges
// exhaustively, number bounds, string lengths and escapes, member order and commas,
// tuples, patterns, $ref recursion, no whitespace between tokens) and the refusals, whose
// messages start with the JSON path of the offending place.
#include "engine/grammar/json_schema_grammar.h"

#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <optional>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "engine/grammar/gbnf_parser.h"
#include "engine/grammar/grammar_matcher.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/testing/json_schema_validator.h"

namespace crossreg::grammar {
namespace {

using Json = nlohmann::ordered_json;
using ::crossreg::testing::ValidateJsonAgainstSchema;

// The schemas live in the source tree; the unit-test binary is not told where that is,
// so this file's own path says (CROSSREG_SOURCE_DIR overrides it when the binary runs
// on another machine).
std::filesystem::path SchemaDir() {
  const char* env = std::getenv("CROSSREG_SOURCE_DIR");
  if (env != nullptr && *env != '\0') return std::filesystem::path(env) / "tests/testdata/json_schemas";
  return std::filesystem::path(__FILE__).parent_path().parent_path() / "testdata/json_schemas";
}

std::string ReadFile(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// A grammar compiled once, for many documents.
class Checker {
 public:
  static std::optional<Checker> FromGbnf(const std::string& gbnf, std::string* error) {
    auto grammar = ParseGbnf(gbnf);
    if (!grammar.ok()) {
      *error = std::string(grammar.status().message()) + "\n" + gbnf;
      return std::nullopt;
    }
    Checker c;
    c.compiled_ = std::make_shared<const CompiledGrammar>(*std::move(grammar));
    return c;
  }
  bool Accepts(std::string_view text) const {
    GrammarMatcher m(compiled_);
    return m.AcceptBytes(text) && m.CanEnd();
  }

 private:
  std::shared_ptr<const CompiledGrammar> compiled_;
};

// The grammar of a schema given as JSON text; fails the test if it does not convert.
std::optional<Checker> CheckerFor(const std::string& schema, std::string* gbnf_out = nullptr) {
  auto gbnf = JsonSchemaToGbnf(schema);
  EXPECT_TRUE(gbnf.ok()) << gbnf.status() << "\nschema: " << schema;
  if (!gbnf.ok()) return std::nullopt;
  if (gbnf_out != nullptr) *gbnf_out = *gbnf;
  std::string error;
  auto checker = Checker::FromGbnf(*gbnf, &error);
  EXPECT_TRUE(checker.has_value()) << error;
  return checker;
}

// Why a document must be rejected.
enum class Bad {
  kSchema,    // JSON that violates the schema: the validator rejects it too
  kSyntax,    // not JSON at all
  kSpelling,  // valid under the schema, outside the grammar's serialization subset
};

struct Invalid {
  std::string doc;
  Bad why;
};

struct SchemaCase {
  std::string file;
  std::vector<std::string> valid;
  std::vector<Invalid> invalid;
};

std::string Spaces(int n) { return std::string(static_cast<size_t>(n), ' '); }

// `doc` without the whitespace between its tokens (strings keep theirs), spelled
// otherwise as written: the form the grammars generate.
std::string Compact(const std::string& doc) {
  std::string out;
  bool in_string = false, escaped = false;
  for (char c : doc) {
    if (in_string) {
      out += c;
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    if (c == ' ' || c == '\n' || c == '\t' || c == '\r') continue;
    if (c == '"') in_string = true;
    out += c;
  }
  return out;
}

const std::vector<SchemaCase>& Cases() {
  static const auto* cases = new std::vector<SchemaCase>{
      {"person.json",
       {R"({"name":"Ada","age":36})", R"({"name":"Bob","age":0,"email":"bob@example.com"})",
        R"({ "name" : "Al" , "age" : 150 })", "{\n  \"name\": \"Z\\u00e9\",\n  \"age\": 7\n}",
        R"({"name":"Jo\"e","age":1,"email":""})"},
       {{R"({"name":"Ada"})", Bad::kSchema},
        {R"({"name":"Ada","age":"36"})", Bad::kSchema},
        {R"({"name":"Ada","age":36,"phone":"1"})", Bad::kSchema},
        {R"({"name":"Ada","age":-1})", Bad::kSchema},
        {R"({"name":"Ada","age":151})", Bad::kSchema},
        {R"({"name":"Ada","age":3.5})", Bad::kSchema},
        {R"({"name":"","age":3})", Bad::kSchema},
        {R"({"name":"Abcdefghijklm","age":3})", Bad::kSchema},
        {R"({"name":"Ada","age":036})", Bad::kSyntax},
        {R"({"name":"Ada,"age":36})", Bad::kSyntax},
        {R"({"name":"Ada","age":36)", Bad::kSyntax},
        {R"({"age":36,"name":"Ada"})", Bad::kSpelling},
        {R"({"name":"Ada",   "age":36})", Bad::kSpelling},
        {R"({"name": "Ada","age":36})", Bad::kSpelling},
        {"{\"name\":\"Ada\",\n" + Spaces(21) + "\"age\":36}", Bad::kSpelling},
        {"{\"name\":\"Ada\",\"age\":36}\n", Bad::kSpelling},
        {" {\"name\":\"Ada\",\"age\":36}", Bad::kSpelling}}},
      {"colour.json",
       {R"("red")", R"("green")", R"("blue")"},
       {{R"("purple")", Bad::kSchema},
        {R"("Red")", Bad::kSchema},
        {"1", Bad::kSchema},
        {R"("red)", Bad::kSyntax},
        {"red", Bad::kSyntax},
        {R"("r\u0065d")", Bad::kSpelling}}},
      {"customer_address.json",
       {R"({"name":"Kim","address":{"street":"Main St 1","city":"Oslo"}})",
        R"({"name":"Kim","address":{"street":"Main St 1","city":"Oslo","zip":"01234"}})"},
       {{R"({"name":"Kim","address":{"street":"Main St 1"}})", Bad::kSchema},
        {R"({"name":"Kim","address":{"street":"A","city":"B","zip":"1234"}})", Bad::kSchema},
        {R"({"name":"Kim","address":{"street":"A","city":"B","zip":"123456"}})", Bad::kSchema},
        {R"({"name":"Kim","address":{"street":"A","city":"B","zip":"1234a"}})", Bad::kSchema},
        {R"({"name":"Kim","address":{"street":"A","city":"B","floor":2}})", Bad::kSchema},
        {R"({"name":"Kim","address":"Main St 1, Oslo"})", Bad::kSchema},
        {R"({"name":"Kim"})", Bad::kSchema}}},
      {"shopping_list.json",
       {R"(["milk"])", R"(["milk","eggs","tea"])", "[\n  \"milk\",\n  \"eggs\"\n]", R"([ "a" ])"},
       {{"[]", Bad::kSchema},
        {R"(["a","b","c","d"])", Bad::kSchema},
        {"[1]", Bad::kSchema},
        {R"([""])", Bad::kSchema},
        {R"(["a very long item"])", Bad::kSchema},
        {R"(["milk",])", Bad::kSyntax},
        {R"(["milk")", Bad::kSyntax}}},
      {"id_or_name.json",
       {R"("abc")", R"("")", "42", "-7", "0"},
       {{"4.5", Bad::kSchema},
        {"null", Bad::kSchema},
        {"true", Bad::kSchema},
        {R"("abcdefghi")", Bad::kSchema},
        {"007", Bad::kSyntax},
        {"1e2", Bad::kSpelling}}},
      {"api_status.json",
       {R"({"version":"v1","ok":true})", R"({"version":"v1","ok":false})"},
       {{R"({"version":"v2","ok":true})", Bad::kSchema},
        {R"({"ok":true})", Bad::kSchema},
        {R"({"version":"v1","ok":"true"})", Bad::kSchema},
        {R"({"version":"v1","ok":true,"extra":1})", Bad::kSchema},
        {R"({"version":"v1","ok":tru})", Bad::kSyntax}}},
      {"tree.json",
       {R"({"value":1})", R"({"value":1,"children":[]})",
        R"({"value":1,"children":[{"value":2},{"value":3,"children":[{"value":4,"children":[]}]}]})"},
       {{R"({"value":1,"children":[{"value":2},{"value":3},{"value":4}]})", Bad::kSchema},
        {R"({"value":1,"children":[{"children":[]}]})", Bad::kSchema},
        {R"({"value":"1"})", Bad::kSchema},
        {R"({"value":10})", Bad::kSchema},
        {R"({"children":[]})", Bad::kSchema},
        {R"({"value":1,"children":[{"value":2},]})", Bad::kSyntax}}},
      {"flags.json",
       {R"({"active":true,"deleted":null,"note":null})", R"({"active":false,"deleted":null,"note":"hi"})"},
       {{R"({"active":"yes","deleted":null,"note":null})", Bad::kSchema},
        {R"({"active":true,"deleted":false,"note":null})", Bad::kSchema},
        {R"({"active":true,"deleted":null,"note":"thirteen char"})", Bad::kSchema},
        {R"({"active":true,"deleted":null})", Bad::kSchema},
        {R"({"active":true,"deleted":null,"note":nul})", Bad::kSyntax}}},
      {"product_code.json",
       {R"({"code":"ABC-12","quantity":5})", R"({"code":"XYZ-00","quantity":99})"},
       {{R"({"code":"AB-12","quantity":5})", Bad::kSchema},
        {R"({"code":"abc-12","quantity":5})", Bad::kSchema},
        {R"({"code":"ABC-123","quantity":5})", Bad::kSchema},
        {R"({"code":"xABC-12","quantity":5})", Bad::kSchema},
        {R"({"code":"ABC-12","quantity":0})", Bad::kSchema},
        {R"({"code":"ABC-12","quantity":100})", Bad::kSchema},
        {R"({"code":"ABC-12","quantity":05})", Bad::kSyntax},
        {R"({"code":"ABC\u002d12","quantity":5})", Bad::kSpelling}}},
      {"event.json",
       {R"({"id":"123e4567-e89b-12d3-a456-426614174000","at":"2024-02-29T13:45:00Z"})",
        R"({"id":"123E4567-E89B-12D3-A456-426614174000","at":"2024-01-01T00:00:00.5+01:00","day":"2024-12-31"})",
        R"({"id":"00000000-0000-0000-0000-000000000000","at":"1999-12-31t23:59:60z","day":"2000-04-30"})"},
       {{R"({"id":"123e4567e89b12d3a456426614174000","at":"2024-02-29T13:45:00Z"})", Bad::kSchema},
        {R"({"id":"123e4567-e89b-12d3-a456-42661417400g","at":"2024-02-29T13:45:00Z"})", Bad::kSchema},
        {R"({"id":"123e4567-e89b-12d3-a456-426614174000","at":"2024-13-01T00:00:00Z"})", Bad::kSchema},
        {R"({"id":"123e4567-e89b-12d3-a456-426614174000","at":"2024-04-31T00:00:00Z"})", Bad::kSchema},
        {R"({"id":"123e4567-e89b-12d3-a456-426614174000","at":"2024-01-01T24:00:00Z"})", Bad::kSchema},
        {R"({"id":"123e4567-e89b-12d3-a456-426614174000","at":"2024-01-01T00:00:00"})", Bad::kSchema},
        {R"({"id":"123e4567-e89b-12d3-a456-426614174000","at":"2024-01-01 00:00:00Z"})", Bad::kSchema},
        {R"({"id":"123e4567-e89b-12d3-a456-426614174000","at":"2024-01-01T00:00:00Z","day":"2024-1-1"})", Bad::kSchema},
        {R"({"id":"123e4567-e89b-12d3-a456-426614174000","at":"2024-01-01T00:00:00Z","tz":"UTC"})", Bad::kSchema}}},
      {"catalogue.json",
       {R"({"products":[]})", R"({"products":[{"name":"Pen","price":1.5,"tags":["office"]},{"name":"Cup","price":0}]})",
        R"({"products":[{"name":"Ink","price":2e3,"tags":[]}]})", R"({"products":[{"name":"Gum","price":0.25E-1}]})"},
       {{R"({"products":[{"name":"Pen","price":-1}]})", Bad::kSchema},
        {R"({"products":[{"name":"A","price":1},{"name":"B","price":2},{"name":"C","price":3}]})", Bad::kSchema},
        {R"({"products":[{"name":"Pen","price":1,"tags":["a","b","c"]}]})", Bad::kSchema},
        {R"({"products":[{"name":"Pen"}]})", Bad::kSchema},
        {R"({"products":[{"name":"Pen","price":1,"colour":"red"}]})", Bad::kSchema},
        {R"({})", Bad::kSchema},
        {R"({"products":[{"name":"Pen","price":01.5}]})", Bad::kSyntax},
        {R"({"products":[{"name":"Pen","price":1.}]})", Bad::kSyntax},
        {R"({"products":[{"name":"Pen","price":.5}]})", Bad::kSyntax},
        {R"({"products":[{"name":"Pen","price":-0}]})", Bad::kSpelling}}},
      {"settings.json",
       {"{}", R"({"theme":"dark"})", R"({"font_size":12,"beta":true})",
        R"({"theme":"light","font_size":8,"beta":false})", R"({"beta":true})", R"({"theme":"light","beta":false})"},
       {{R"({"theme":"blue"})", Bad::kSchema},
        {R"({"font_size":7})", Bad::kSchema},
        {R"({"font_size":33})", Bad::kSchema},
        {R"({"colour":"x"})", Bad::kSchema},
        {R"({"beta":1})", Bad::kSchema},
        {"[]", Bad::kSchema},
        {R"({,"beta":true})", Bad::kSyntax},
        {R"({"beta":true,})", Bad::kSyntax},
        {R"({"theme":"dark" "beta":true})", Bad::kSyntax},
        {R"({"beta":true,"theme":"dark"})", Bad::kSpelling}}},
      {"counter.json",
       {"0", "7", "1234567", "9999999999999999"},
       {{"-1", Bad::kSchema},
        {"18446744073709551615", Bad::kSpelling},  // more than 16 digits
        {"1.5", Bad::kSchema},
        {R"("3")", Bad::kSchema},
        {"012", Bad::kSyntax},
        {"-0", Bad::kSpelling},
        {"1e2", Bad::kSpelling}}},
      {"point.json",
       {"[1,2]", "[0.5,-3e2]", "[ -0 , 1E+2 ]"},
       {{"[1]", Bad::kSchema}, {"[1,2,3]", Bad::kSchema}, {R"(["1",2])", Bad::kSchema}, {"[1 2]", Bad::kSyntax}}},
      {"shape.json",
       {R"({"kind":"circle","radius":2.5})", R"({"kind":"circle","radius":0.001})", R"({"kind":"square","side":3})"},
       {{R"({"kind":"circle","radius":0})", Bad::kSchema},
        {R"({"kind":"circle","radius":-2})", Bad::kSchema},
        {R"({"kind":"square","side":11})", Bad::kSchema},
        {R"({"kind":"triangle","side":3})", Bad::kSchema},
        {R"({"kind":"circle","side":3})", Bad::kSchema},
        {R"({"kind":"circle","radius":0.0})", Bad::kSchema}}},
  };
  return *cases;
}

TEST(JsonSchemaGrammarTest, EveryTestdataSchemaHasCases) {
  std::set<std::string> files;
  for (const auto& entry : std::filesystem::directory_iterator(SchemaDir())) {
    if (entry.path().extension() == ".json") files.insert(entry.path().filename().string());
  }
  EXPECT_GE(files.size(), 12u) << SchemaDir();
  std::set<std::string> covered;
  for (const SchemaCase& c : Cases()) covered.insert(c.file);
  EXPECT_EQ(files, covered);
}

class TestdataSchemaTest : public ::testing::TestWithParam<SchemaCase> {};

TEST_P(TestdataSchemaTest, AcceptsValidAndRejectsInvalidDocuments) {
  const SchemaCase& c = GetParam();
  const std::string text = ReadFile(SchemaDir() / c.file);
  ASSERT_FALSE(text.empty()) << SchemaDir() / c.file;
  const Json schema = Json::parse(text);
  std::string gbnf;
  auto checker = CheckerFor(text, &gbnf);
  ASSERT_TRUE(checker.has_value());
  for (const std::string& doc : c.valid) {
    const Json parsed = Json::parse(doc);
    EXPECT_EQ(ValidateJsonAgainstSchema(parsed, schema), "") << doc;
    EXPECT_TRUE(checker->Accepts(Compact(doc))) << Compact(doc) << "\n" << gbnf;
    // Also as the JSON library prints it; never indented (the grammars generate no
    // whitespace between tokens).
    EXPECT_TRUE(checker->Accepts(parsed.dump())) << parsed.dump();
    if (parsed.dump(2) != parsed.dump()) {
      EXPECT_FALSE(checker->Accepts(parsed.dump(2))) << parsed.dump(2);
    }
  }
  for (const Invalid& bad : c.invalid) {
    EXPECT_FALSE(checker->Accepts(bad.doc)) << bad.doc << "\n" << gbnf;
    if (bad.why == Bad::kSyntax) {
      EXPECT_FALSE(Json::accept(bad.doc)) << "meant to be malformed: " << bad.doc;
      continue;
    }
    ASSERT_TRUE(Json::accept(bad.doc)) << bad.doc;
    const std::string verdict = ValidateJsonAgainstSchema(Json::parse(bad.doc), schema);
    if (bad.why == Bad::kSchema) {
      EXPECT_NE(verdict, "") << "the validator accepts " << bad.doc;
    } else {
      EXPECT_EQ(verdict, "") << "meant to be valid but unusually spelled: " << bad.doc;
    }
  }
  // No raw control characters in the grammar text.
  for (char ch : gbnf) EXPECT_TRUE(ch == '\n' || (ch >= 0x20 && ch < 0x7F)) << static_cast<int>(ch);
}

// Every subtree of `v`, for mutations to draw from.
void CollectSubtrees(const Json& v, std::vector<Json>& out) {
  out.push_back(v);
  if (v.is_structured()) {
    for (const auto& child : v) CollectSubtrees(child, out);
  }
}

// A random node of `v` (uniform over nodes, by reservoir sampling).
Json* RandomNode(Json& v, std::mt19937& rng, int* seen) {
  Json* chosen = nullptr;
  if (std::uniform_int_distribution<int>(0, (*seen)++)(rng) == 0) chosen = &v;
  if (v.is_structured()) {
    for (auto& child : v) {
      if (Json* c = RandomNode(child, rng, seen); c != nullptr) chosen = c;
    }
  }
  return chosen;
}

// Soundness beyond the hand-written cases: random edits of the valid documents (values
// swapped for others seen anywhere in them or for odd scalars, members and items dropped,
// added or repeated), compact; whatever the grammar accepts, the validator must accept.
TEST_P(TestdataSchemaTest, AcceptedMutationsAreValid) {
  const SchemaCase& c = GetParam();
  const std::string text = ReadFile(SchemaDir() / c.file);
  const Json schema = Json::parse(text);
  auto checker = CheckerFor(text);
  ASSERT_TRUE(checker.has_value());
  std::vector<Json> pool = {nullptr,
                            true,
                            false,
                            0,
                            -1,
                            7,
                            10,
                            150,
                            151,
                            1.5,
                            -0.5,
                            "",
                            "a",
                            "red",
                            "ABC-12",
                            "2024-02-29",
                            "thirteen char",
                            Json::array(),
                            Json::object()};
  std::vector<Json> seeds;
  for (const std::string& doc : c.valid) {
    seeds.push_back(Json::parse(doc));
    CollectSubtrees(seeds.back(), pool);
  }
  std::vector<std::string> names = {"extra"};
  for (const Json& v : pool) {
    if (v.is_object()) {
      for (const auto& [key, unused] : v.items()) names.push_back(key);
    }
  }
  std::mt19937 rng(20240229);
  const auto pick = [&](size_t n) { return std::uniform_int_distribution<size_t>(0, n - 1)(rng); };
  int accepted = 0;
  for (int trial = 0; trial < 400; ++trial) {
    Json doc = seeds[pick(seeds.size())];
    for (int edits = 1 + static_cast<int>(pick(2)); edits > 0; --edits) {
      int seen = 0;
      Json* node = RandomNode(doc, rng, &seen);
      switch (pick(4)) {
        case 0:
          *node = pool[pick(pool.size())];
          break;
        case 1:
          if (node->is_object() && !node->empty()) {
            auto it = node->begin();
            std::advance(it, static_cast<std::ptrdiff_t>(pick(node->size())));
            node->erase(it.key());
          } else if (node->is_array() && !node->empty()) {
            node->erase(pick(node->size()));
          }
          break;
        case 2:
          if (node->is_object()) (*node)[names[pick(names.size())]] = pool[pick(pool.size())];
          if (node->is_array()) node->push_back(pool[pick(pool.size())]);
          break;
        default:
          if (node->is_array() && !node->empty()) node->push_back((*node)[pick(node->size())]);
          break;
      }
    }
    const std::string compact = doc.dump();
    if (!checker->Accepts(compact)) continue;
    ++accepted;
    EXPECT_EQ(ValidateJsonAgainstSchema(doc, schema), "") << "the grammar accepts " << compact;
  }
  EXPECT_GT(accepted, 0);
}

INSTANTIATE_TEST_SUITE_P(Testdata, TestdataSchemaTest, ::testing::ValuesIn(Cases()),
                         [](const ::testing::TestParamInfo<SchemaCase>& info) {
                           std::string name;
                           for (char ch : info.param.file.substr(0, info.param.file.find('.'))) {
                             if (std::isalnum(static_cast<unsigned char>(ch))) name += ch;
                           }
                           return name;
                         });

// Accepted and rejected texts for one inline schema; the validator must agree on each
// (every text here is JSON, spelled within the grammar's subset unless `spelling`).
void ExpectSchema(const std::string& schema_text, const std::vector<std::string>& accepted,
                  const std::vector<std::string>& rejected, const std::vector<std::string>& spelling = {}) {
  SCOPED_TRACE(schema_text);
  std::string gbnf;
  auto checker = CheckerFor(schema_text, &gbnf);
  ASSERT_TRUE(checker.has_value());
  const Json schema = Json::parse(schema_text);
  for (const std::string& doc : accepted) {
    EXPECT_TRUE(checker->Accepts(Compact(doc))) << Compact(doc) << "\n" << gbnf;
    EXPECT_EQ(ValidateJsonAgainstSchema(Json::parse(doc), schema), "") << doc;
  }
  for (const std::string& doc : rejected) {
    EXPECT_FALSE(checker->Accepts(Compact(doc))) << Compact(doc) << "\n" << gbnf;
    if (Json::accept(doc)) {
      EXPECT_NE(ValidateJsonAgainstSchema(Json::parse(doc), schema), "") << doc;
    }
  }
  for (const std::string& doc : spelling) {  // as written: whitespace is spelling too
    EXPECT_FALSE(checker->Accepts(doc)) << doc << "\n" << gbnf;
    EXPECT_EQ(ValidateJsonAgainstSchema(Json::parse(doc), schema), "") << doc;
  }
}

TEST(JsonSchemaGrammarTest, IntegerBoundsAreExact) {
  struct Bounds {
    std::string keywords;
    int64_t lo, hi;  // inclusive; +-1e9 for unbounded
  };
  constexpr int64_t kInf = 1000000000;
  const std::vector<Bounds> cases = {
      {R"("minimum": 0, "maximum": 150)", 0, 150},
      {R"("minimum": 1, "maximum": 99)", 1, 99},
      {R"("minimum": -15, "maximum": 7)", -15, 7},
      {R"("minimum": -120, "maximum": -3)", -120, -3},
      {R"("minimum": 5)", 5, kInf},
      {R"("minimum": 100)", 100, kInf},
      {R"("minimum": -7)", -7, kInf},
      {R"("maximum": -5)", -kInf, -5},
      {R"("maximum": 42)", -kInf, 42},
      {R"("minimum": 100, "maximum": 1000)", 100, 1000},
      {R"("minimum": 999, "maximum": 1001)", 999, 1001},
      {R"("minimum": 0, "maximum": 0)", 0, 0},
      {R"("exclusiveMinimum": 2.5, "exclusiveMaximum": 10)", 3, 9},
      {R"("minimum": 1.2, "maximum": 4.8)", 2, 4},
      {R"("minimum": 3, "exclusiveMinimum": true, "maximum": 9, "exclusiveMaximum": true)", 4, 8},
  };
  for (const Bounds& b : cases) {
    const std::string schema = R"({"type": "integer", )" + b.keywords + "}";
    SCOPED_TRACE(schema);
    auto checker = CheckerFor(schema);
    ASSERT_TRUE(checker.has_value());
    std::vector<int64_t> values;
    for (int64_t v = -1100; v <= 1100; ++v) values.push_back(v);
    for (int64_t v : {-123456789LL, -54321LL, 12345LL, 99999LL, 123456789LL}) values.push_back(v);
    for (int64_t v : values) {
      const bool inside = v >= b.lo && v <= b.hi;
      ASSERT_EQ(checker->Accepts(std::to_string(v)), inside) << v;
    }
    EXPECT_FALSE(checker->Accepts("01"));
    EXPECT_FALSE(checker->Accepts("1.0"));
  }
}

TEST(JsonSchemaGrammarTest, NumberLowerBoundOfZero) {
  ExpectSchema(R"({"type": "number", "minimum": 0})", {"0", "0.0", "1.5e3", "2E-7", "0e5"}, {"-1", "-0.5"}, {"-0"});
  ExpectSchema(R"({"type": "number", "exclusiveMinimum": 0})", {"0.001", "1", "1e-5", "10.0", "0.01e2"},
               {"0", "0.0", "0e5", "0.000", "-1", "-0.1"});
  ExpectSchema(R"({"type": ["number", "integer"]})", {"1", "1.5", "-2e3"}, {"\"1\""});
}

TEST(JsonSchemaGrammarTest, StringLengthsCountCodePoints) {
  ExpectSchema(R"({"type": "string", "minLength": 2, "maxLength": 3})",
               {R"("ab")", "\"\xc3\xa9\xc3\xa9\xc3\xa9\"", R"("\n\t")", R"("\ud83d\ude00x")", R"("\u00e9\/")",
                "\"\xf0\x9f\x98\x80\xf0\x9f\x98\x80\""},
               {R"("a")", R"("abcd")", "\"\xf0\x9f\x98\x80\xf0\x9f\x98\x80\xf0\x9f\x98\x80\xf0\x9f\x98\x80\"",
                R"("\ud83d\ude00")"});
  ExpectSchema(R"({"type": "string", "maxLength": 0})", {R"("")"}, {R"("a")"});
}

TEST(JsonSchemaGrammarTest, GenericStringsFollowJson) {
  auto checker = CheckerFor(R"({"type": "string"})");
  ASSERT_TRUE(checker.has_value());
  for (const char* ok : {R"("")", R"("\"\\\/\b\f\n\r\t")", R"("\u00e9\uD83D\uDE00")", "\"\xe2\x82\xac\""}) {
    EXPECT_TRUE(checker->Accepts(ok)) << ok;
  }
  for (const char* bad :
       {"\"\x01\"", "\"a\nb\"", R"("\udc00")", R"("\ud83d")", R"("\x41")", R"("\u12")", R"("abc)", R"("a"b")"}) {
    EXPECT_FALSE(checker->Accepts(bad)) << bad;
  }
}

TEST(JsonSchemaGrammarTest, NoWhitespaceBetweenTokens) {
  auto grammar = ParseGbnf(JsonObjectGbnf());
  ASSERT_TRUE(grammar.ok()) << grammar.status() << "\n" << JsonObjectGbnf();
  for (const std::string& ok : std::vector<std::string>{
           "{}", R"({"a":[1,{"b":null}],"c":"d","e":-1.5e3,"f":true})", R"({"a b":" x\ty "})"}) {
    EXPECT_TRUE(GrammarAccepts(*grammar, ok)) << ok;
  }
  for (const std::string& bad : std::vector<std::string>{"{ }", "{\n}", R"({"a": 1})", R"({"a":1, "b":2})",
                                                         R"({"a":[1 ]})", " {}", "{}\n", "[]", "\"x\"", "{\"a\" 1}"}) {
    EXPECT_FALSE(GrammarAccepts(*grammar, bad)) << bad;
  }
}

TEST(JsonSchemaGrammarTest, EmptySchemaAndTrueAcceptAnyValue) {
  for (const char* schema : {"{}", "true", R"({"description": "anything"})"}) {
    ExpectSchema(schema, {"1", R"("s")", "null", "[1,[true]]", R"({"a":{"b":[]}})", "-0.5e-3"}, {"nul", "[1,]"});
  }
}

TEST(JsonSchemaGrammarTest, OptionalPropertiesNeedCommasOnlyBetweenMembers) {
  const std::string all_optional =
      R"({"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"},
          "c": {"type": "integer"}}, "additionalProperties": false})";
  ExpectSchema(all_optional,
               {"{}", R"({"a":1})", R"({"b":1})", R"({"c":1})", R"({"a":1,"c":1})", R"({"b":1,"c":1})",
                R"({"a":1,"b":2,"c":3})"},
               {R"({"a":1,"d":1})"}, {R"({"c":1,"a":1})"});
  for (const char* malformed : {R"({,"a":1})", R"({"a":1,})", R"({"a":1 "b":1})", R"({"a":1,,"b":1})"}) {
    auto checker = CheckerFor(all_optional);
    ASSERT_TRUE(checker.has_value());
    EXPECT_FALSE(checker->Accepts(malformed)) << malformed;
  }
  ExpectSchema(R"({"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"},
                  "c": {"type": "integer"}}, "required": ["b"], "additionalProperties": false})",
               {R"({"b":1})", R"({"a":1,"b":1})", R"({"b":1,"c":1})", R"({"a":1,"b":2,"c":3})"},
               {"{}", R"({"a":1})", R"({"a":1,"c":1})"});
}

TEST(JsonSchemaGrammarTest, AdditionalProperties) {
  ExpectSchema(R"({"type": "object", "properties": {"id": {"type": "integer"}}, "required": ["id"],
                  "additionalProperties": {"type": "string", "maxLength": 3}})",
               {R"({"id":1})", R"({"id":1,"x":"abc","y":""})"}, {R"({"id":1,"x":5})", R"({"id":1,"x":"abcd"})", "{}"},
               {R"({"x":"a","id":1})"});
  // Absent: any further members, any values; and no type: every other type too.
  ExpectSchema(R"({"properties": {"a": {"type": "integer"}}})",
               {R"({"a":1,"b":[true]})", R"({"b":2})", "{}", "5", R"("str")", "null", "[]", R"({"ab":"x","":1})"},
               {R"({"a":"x"})", R"({"b":2,"a":"x"})"}, {R"({"b":2,"a":1})"});
  // A listed name cannot come again as a further member (nor a property whose schema is
  // false); further keys are spelled canonically.
  auto checker = CheckerFor(R"({"type": "object", "properties": {"a": {"type": "integer"}, "no": false}})");
  ASSERT_TRUE(checker.has_value());
  EXPECT_TRUE(checker->Accepts(R"({"a":1,"b":2,"n":3,"nop":4})"));
  EXPECT_FALSE(checker->Accepts(R"({"a":1,"a":2})"));
  EXPECT_FALSE(checker->Accepts(R"({"no":1})"));
  EXPECT_FALSE(checker->Accepts(R"({"a":1,"no":1})"));
  EXPECT_FALSE(checker->Accepts(R"({"\u0061":1})"));
  // A required name that is not a property: appended to the properties.
  ExpectSchema(R"({"type": "object", "required": ["id"]})", {R"({"id":5})", R"({"id":{},"z":1})"}, {"{}", R"({"z":1})"},
               {R"({"z":1,"id":5})"});
  ExpectSchema(R"({"type": "object", "additionalProperties": false})", {"{}", "{ }"}, {R"({"a":1})"});
}

TEST(JsonSchemaGrammarTest, TuplesAndItemCounts) {
  ExpectSchema(R"({"type": "array", "prefixItems": [{"type": "string"}, {"type": "integer"}],
                  "items": {"type": "boolean"}, "maxItems": 3})",
               {R"(["a",1])", R"(["a",1,true])", R"(["a"])", "[]"}, {R"(["a",1,true,false])", "[1]", R"(["a",1,"x"])"});
  ExpectSchema(R"({"type": "array", "items": [{"type": "integer"}], "additionalItems": false})", {"[]", "[1]"},
               {"[1,2]", R"(["1"])"});
  ExpectSchema(R"({"type": "array", "minItems": 2, "maxItems": 4})", {"[1,2]", R"([1,"a",null,[]])"},
               {"[1]", "[1,2,3,4,5]"});
  ExpectSchema(R"({"type": "array", "items": {"type": "integer"}, "minItems": 2})", {"[1,2]", "[1,2,3,4,5,6]"},
               {"[1]", "[]", "[1,2.5]"});
  ExpectSchema(R"({"type": "array", "maxItems": 0})", {"[]", "[ ]"}, {"[1]"});
}

TEST(JsonSchemaGrammarTest, PatternsSearchUnlessAnchored) {
  ExpectSchema(R"({"type": "string", "pattern": "ab"})", {R"("ab")", R"("xaby")", R"("xxab")"}, {R"("a")", R"("ba")"});
  ExpectSchema(R"({"type": "string", "pattern": "^ab"})", {R"("abz")"}, {R"("zab")"});
  ExpectSchema(R"({"type": "string", "pattern": "ab$"})", {R"("zab")"}, {R"("abz")"});
  ExpectSchema(R"({"type": "string", "pattern": "^a|b$"})", {R"("ax")", R"("xb")"}, {R"("xa")", R"("bx")"});
  ExpectSchema(R"({"type": "string", "pattern": "^a\"b\\\\c$"})", {R"("a\"b\\c")"}, {R"("a\"bc")"});
  ExpectSchema(R"({"type": "string", "pattern": "^\\d+$"})", {R"("123")"}, {R"("12a")", R"("")"});
  ExpectSchema(R"({"type": "string", "pattern": "^.$"})", {R"("\t")", R"("\u0001")", R"("\"")"}, {R"("\n")", R"("")"},
               {R"("\u0041")"});
}

TEST(JsonSchemaGrammarTest, EnumAndConstUseCanonicalSpellings) {
  ExpectSchema(R"({"enum": ["a\"b", "\u00e9", 1, null, [1, 2], {"k": "v"}, true]})",
               {R"("a\"b")", "\"\xc3\xa9\"", "1", "null", "[1,2]", R"({"k":"v"})", "true"}, {"2", R"("a")", "false"},
               {R"("\u00e9")", "[1, 2]"});
  ExpectSchema(R"({"type": "string", "enum": ["a", 1]})", {R"("a")"}, {"1"});
  ExpectSchema(R"({"const": {"x": [1, "y"]}})", {R"({"x":[1,"y"]})"}, {R"({"x":[1]})"});
}

TEST(JsonSchemaGrammarTest, RecursiveReferences) {
  ExpectSchema(R"({"type": "object", "properties": {"next": {"$ref": "#"}}, "additionalProperties": false})",
               {"{}", R"({"next":{}})", R"({"next":{"next":{}}})"}, {R"({"next":1})"});
  ExpectSchema(R"({"$defs": {"list": {"anyOf": [{"type": "null"}, {"type": "array", "prefixItems": [{"type": "integer"},
                  {"$ref": "#/$defs/list"}], "items": false, "minItems": 2}]}}, "$ref": "#/$defs/list"})",
               {"null", "[1,null]", "[1,[2,[3,null]]]"}, {"[1]", "[1,[2]]"});
}

TEST(JsonSchemaGrammarTest, FormatsDateAndTime) {
  ExpectSchema(R"({"type": "string", "format": "date"})", {R"("2024-02-29")", R"("1999-11-30")"},
               {R"("2024-02-30")", R"("2024-11-31")", R"("2024-00-10")", R"("2024-01-32")", R"("24-01-01")"});
  ExpectSchema(R"({"type": "string", "format": "time"})", {R"("23:59:59Z")", R"("00:00:00.123-05:30")"},
               {R"("23:59")", R"("23:60:00Z")", R"("12:00:00+24:00")"});
}

TEST(JsonSchemaGrammarTest, RefusalsStartWithThePath) {
  std::vector<std::pair<std::string, std::string>> cases = {
      {R"({"not": {}})", "json_schema.not: not supported"},
      {R"({"properties": {"age": {"type": "number", "maximum": 5}}})", "json_schema.properties.age.maximum: "},
      {R"({"type": "number", "minimum": 1.5})", "json_schema.minimum: "},
      {R"({"type": "integer", "multipleOf": 2})", "json_schema.multipleOf: not supported"},
      {R"({"type": "string", "format": "email"})", "json_schema.format: format \"email\" not supported"},
      {R"({"allOf": [{}, {}]})", "json_schema.allOf: "},
      {R"({"type": "array", "uniqueItems": true})", "json_schema.uniqueItems: "},
      {R"({"$ref": "http://example.com/schema"})", "json_schema.$ref: "},
      {R"({"$ref": "#/$defs/missing"})", "json_schema.$ref: "},
      {R"({"type": "object", "patternProperties": {"^a": {}}})", "json_schema.patternProperties: not supported"},
      {R"({"type": "object", "properties": {"p": {"type": "string", "pattern": "(a)\\1"}}})",
       "json_schema.properties.p.pattern: regex: 3: backreference"},
      {R"({"type": "object", "properties": {"x": {"$ref": "#/$defs/a"}},
          "$defs": {"a": {"anyOf": [{"$ref": "#/$defs/a"}, {"type": "null"}]}}})",
       "json_schema.$defs.a.anyOf[0].$ref: "},
      {R"({"type": "array", "minItems": 3, "maxItems": 2})", "json_schema.minItems: "},
      {R"({"type": "string", "minLength": 3, "maxLength": 2})", "json_schema.minLength: "},
      {R"({"type": "string", "maxLength": 5000})", "json_schema.maxLength: "},
      {R"({"enum": [1, 2], "minimum": 0})", "json_schema.minimum: not supported next to enum or const"},
      {R"({"type": "string", "pattern": "a", "maxLength": 3})", "json_schema.pattern: "},
      {R"({"anyOf": [{"type": "string"}], "type": "string"})", "json_schema.type: not supported next to anyOf"},
      {R"({"type": "strng"})", "json_schema.type: unknown type \"strng\""},
      {R"({"properties": {"a": false}, "required": ["a"]})", "json_schema.properties.a: "},
      {R"({"type": "object", "required": ["id"], "additionalProperties": false})", "json_schema.required: "},
      {R"({"items": {"if": {}}})", "json_schema.items.if: not supported"},
      {"false", "json_schema: "},
      {R"({"type": "integer", "minimum": 1e20})", "json_schema.minimum: "},
      {R"({"type": "integer", "minimum": 5, "exclusiveMaximum": 5})", "json_schema.exclusiveMaximum: "},
      {"{not json", "json_schema: not valid JSON"},
  };
  std::string deep_schema, deep_enum = "[", closing;
  for (int i = 0; i < 100; ++i) {
    deep_schema += R"({"type": "array", "items": )";
    deep_enum += "[";
    closing += "}";
  }
  deep_schema += "{}" + closing;
  deep_enum += std::string(101, ']');
  cases.push_back({deep_schema, "json_schema.items.items."});
  cases.push_back({R"({"enum": )" + deep_enum + "}", "json_schema.enum[0]"});
  for (const auto& [schema, prefix] : cases) {
    auto gbnf = JsonSchemaToGbnf(schema);
    ASSERT_FALSE(gbnf.ok()) << schema << "\n" << *gbnf;
    EXPECT_EQ(gbnf.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_TRUE(absl::StartsWith(gbnf.status().message(), prefix)) << gbnf.status().message() << "\nwanted " << prefix;
  }
}

TEST(JsonSchemaGrammarTest, RuleNamesStayValidAndDistinct) {
  // Property names that sanitize alike, names of shared rules, and numeric names next to
  // the parser's own group rules ("<rule>-<number>").
  ExpectSchema(R"({"type": "object", "properties": {"a b": {"type": "integer", "minimum": 1},
                  "a-b": {"type": "integer", "minimum": 2}, "string": {"enum": ["x"]}, "": {"const": 0},
                  "\u00fcber": {"type": "string", "pattern": "^u$"},
                  "1": {"anyOf": [{"type": "integer", "maximum": 3},
                        {"type": "array", "prefixItems": [{"type": "string"}, {"enum": [1, 2]}], "items": false}]},
                  "2": {"type": "array", "prefixItems": [{"anyOf": [{"type": "null"}, {"type": "boolean"}]}]}},
                  "additionalProperties": false})",
               {R"({"a b":1,"a-b":2,"string":"x","":0,"über":"u"})", "{}", R"({"1":3})", R"({"1":["a",2]})",
                R"({"1":["a"],"2":[null,5]})"},
               {R"({"a b":0})", R"({"a-b":1})", R"({"1":4})", R"({"1":["a",3]})", R"({"2":[1]})"});
}

TEST(JsonSchemaGrammarTest, JsonObjectGrammar) {
  auto grammar = ParseGbnf(JsonObjectGbnf());
  ASSERT_TRUE(grammar.ok()) << grammar.status();
  EXPECT_TRUE(GrammarAccepts(*grammar, R"({"a":{"b":[1,2,{"c":"\u00e9"}]},"d":false})"));
  EXPECT_FALSE(GrammarAccepts(*grammar, "[1]"));
  EXPECT_FALSE(GrammarAccepts(*grammar, R"({"a":})"));
  EXPECT_FALSE(GrammarAccepts(*grammar, R"({"a":1,})"));
}

}  // namespace
}  // namespace crossreg::grammar
