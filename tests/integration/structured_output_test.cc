// Structured output through the server, on both APIs: every reply under each test
// schema (tests/testdata/json_schemas) parses and validates against it, greedy and
// sampled, in every mode, on stories260K, the default model and a model with a
// 128k-token vocabulary; greedy replies are the same ids in every mode; GBNF and
// regular-expression constraints hold; bad constraints are refused naming the field.
#include <httplib.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/integration/generation_client.h"
#include "tests/integration/random_adapter_server.h"
#include "tests/integration/server_process.h"
#include "engine/grammar/gbnf_parser.h"
#include "engine/grammar/grammar_matcher.h"
#include "engine/grammar/json_schema_grammar.h"
#include "engine/model/lora_adapter.h"
#include "engine/model/model_loader.h"
#include "engine/model/peft_writer.h"
#include "tests/testing/json_schema_validator.h"
#include "tests/testing/tiny_gguf.h"
#include "tests/testing/test_paths.h"

namespace crossreg::testing {
namespace {

using Json = nlohmann::ordered_json;

struct Reply {
  int status = 0;
  Json body;
  std::string raw;
};

Reply Post(int port, const std::string& path, const Json& body) {
  httplib::Client client("127.0.0.1", port);
  client.set_read_timeout(120, 0);
  auto res = client.Post(path.c_str(), body.dump(), "application/json");
  Reply reply;
  if (!res) return reply;
  reply.status = res->status;
  reply.raw = res->body;
  reply.body = Json::parse(res->body, nullptr, false);
  return reply;
}

struct Schema {
  std::string name;
  Json schema;
};

std::vector<Schema> TestSchemas() {
  std::vector<Schema> out;
  const std::filesystem::path dir = std::filesystem::path(SourceDir()) / "tests/testdata/json_schemas";
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.path().extension() != ".json") continue;
    std::ifstream in(entry.path());
    std::stringstream text;
    text << in.rdbuf();
    out.push_back({entry.path().stem().string(), Json::parse(text.str())});
  }
  std::sort(out.begin(), out.end(), [](const Schema& a, const Schema& b) { return a.name < b.name; });
  return out;
}

class StructuredOutputTest : public RandomAdapterServerTest<StructuredOutputTest> {
 public:
  static constexpr const char* kName = "structured";
  static constexpr uint64_t kAdapterSeed = 13;
};

const struct {
  v1::DecodingMode grpc;
  const char* http;
} kSchemaModes[] = {{v1::DECODING_MODE_AR, "ar"},
              {v1::DECODING_MODE_LOSSLESS, "lossless"},
              {v1::DECODING_MODE_NGRAM, "ngram"}};

constexpr int kMaxTokens = 400;

// A recursive schema (tree.json: nodes with children) lets a model nest without end:
// greedy decoding of a small model may still be nesting at max_tokens.
bool MayRunToTheLimit(const std::string& schema_name) { return schema_name == "tree"; }

// The reply's text must be a JSON document valid under the schema, and complete; or,
// where the schema allows unbounded nesting and max_tokens cut the reply, a prefix of
// a document the schema's grammar accepts.
void ExpectValid(const std::string& text, const Schema& schema, const std::string& finish) {
  if (finish == "length" && MayRunToTheLimit(schema.name)) {
    auto gbnf = grammar::JsonSchemaToGbnf(schema.schema.dump());
    ASSERT_TRUE(gbnf.ok()) << gbnf.status();
    auto parsed = grammar::ParseGbnf(*gbnf);
    ASSERT_TRUE(parsed.ok()) << parsed.status();
    grammar::GrammarMatcher matcher(std::make_shared<const grammar::CompiledGrammar>(*std::move(parsed)));
    EXPECT_TRUE(matcher.AcceptBytes(text)) << "cut by max_tokens but not a prefix of the schema's documents: " << text;
    return;
  }
  EXPECT_EQ(finish, "stop") << text;
  const Json doc = Json::parse(text, nullptr, false);
  ASSERT_FALSE(doc.is_discarded()) << "not JSON: " << text;
  EXPECT_EQ(ValidateJsonAgainstSchema(doc, schema.schema), "") << text;
}

std::string FinishName(v1::FinishReason reason) {
  return reason == v1::FINISH_REASON_STOP ? "stop" : reason == v1::FINISH_REASON_LENGTH ? "length" : "other";
}

// Every test schema, in each mode of `modes` (the first is AR): greedy on gRPC and
// greedy and sampled on HTTP, each reply valid and complete, greedy ids equal to AR's.
void ExpectEverySchemaHolds(ServerProcess& server, const std::vector<size_t>& modes) {
  const std::vector<Schema> schemas = TestSchemas();
  ASSERT_GE(schemas.size(), 10u);
  auto stub = server.NewStub();
  for (const Schema& s : schemas) {
    SCOPED_TRACE(s.name);
    std::vector<int32_t> ar;
    for (size_t m : modes) {
      const auto& mode = kSchemaModes[m];
      SCOPED_TRACE(mode.http);
      // gRPC, greedy.
      v1::GenerateRequest request = GreedyRequest("Once upon a time", mode.grpc, kMaxTokens, 4);
      request.mutable_structured_output()->set_json_schema(s.schema.dump());
      const StreamResult grpc = RunGenerate(*stub, request);
      ASSERT_TRUE(grpc.status.ok()) << grpc.status.error_message();
      ASSERT_TRUE(grpc.has_complete);
      ExpectValid(grpc.text, s, FinishName(grpc.complete.finish_reason()));
      if (mode.grpc == v1::DECODING_MODE_AR) ar = grpc.ids;
      EXPECT_EQ(grpc.ids, ar) << "greedy ids differ from AR's";
      // HTTP completions, greedy and sampled.
      for (const double temperature : {0.0, 0.9}) {
        const Json body = {{"prompt", "Once upon a time"}, {"max_tokens", kMaxTokens}, {"temperature", temperature},
                           {"seed", 5}, {"mode", mode.http}, {"gamma", 4}, {"return_token_ids", true},
                           {"response_format", {{"type", "json_schema"},
                                                {"json_schema", {{"name", s.name}, {"schema", s.schema},
                                                                 {"strict", true}}}}}};
        const Reply r = Post(server.http_port(), "/v1/completions", body);
        ASSERT_EQ(r.status, 200) << r.raw;
        const Json& choice = r.body["choices"][0];
        ExpectValid(choice["text"].get<std::string>(), s, choice["finish_reason"].get<std::string>());
        if (temperature == 0.0) {
          EXPECT_EQ(choice["token_ids"].get<std::vector<int32_t>>(), ar);
        }
      }
    }
  }
}

TEST_F(StructuredOutputTest, EveryReplyValidatesAgainstItsSchemaInEveryModeOnBothApis) {
  ExpectEverySchemaHolds(*server_, {0, 1, 2});
}

// The embedded default model (its tokenizer, its trained adapter): the same guarantees.
TEST(StructuredOutputDefaultModelTest, EveryReplyValidatesAgainstItsSchemaInEveryModeOnBothApis) {
  ServerProcess server({}, SourceDir() + "/models/default");
  ASSERT_TRUE(server.Start(120)) << server.Log();
  ExpectEverySchemaHolds(server, {0, 1, 2});
  EXPECT_EQ(server.Terminate(), 0);
}

TEST_F(StructuredOutputTest, JsonObjectGrammarAndRegexConstraintsHold) {
  // Any JSON object: stopped replies are objects.
  const Reply object = Post(server_->http_port(), "/v1/completions",
                            {{"prompt", "Once"}, {"max_tokens", kMaxTokens}, {"temperature", 0},
                             {"response_format", {{"type", "json_object"}}}});
  ASSERT_EQ(object.status, 200) << object.raw;
  const std::string text = object.body["choices"][0]["text"].get<std::string>();
  ASSERT_FALSE(text.empty());
  EXPECT_EQ(text[0], '{') << text;
  if (object.body["choices"][0]["finish_reason"] == "stop") {
    const Json doc = Json::parse(text, nullptr, false);
    EXPECT_TRUE(doc.is_object()) << text;
  }
  // A GBNF grammar and a regular expression, in every mode.
  for (const auto& mode : kSchemaModes) {
    SCOPED_TRACE(mode.http);
    const Reply g = Post(server_->http_port(), "/v1/completions",
                         {{"prompt", "Once upon a time"}, {"max_tokens", 64}, {"temperature", 0}, {"mode", mode.http},
                          {"grammar", "root ::= (\"yes\" | \"no\") \", \" [a-z]{2,5} \".\""}});
    ASSERT_EQ(g.status, 200) << g.raw;
    EXPECT_TRUE(std::regex_match(g.body["choices"][0]["text"].get<std::string>(),
                                 std::regex("(yes|no), [a-z]{2,5}\\.")))
        << g.raw;
    const Reply re = Post(server_->http_port(), "/v1/completions",
                          {{"prompt", "Once upon a time"}, {"max_tokens", 64}, {"temperature", 0.8}, {"seed", 3},
                           {"mode", mode.http}, {"regex", "[A-Z]{3}-[0-9]{2,4}"}});
    ASSERT_EQ(re.status, 200) << re.raw;
    EXPECT_TRUE(std::regex_match(re.body["choices"][0]["text"].get<std::string>(), std::regex("[A-Z]{3}-[0-9]{2,4}")))
        << re.raw;
  }
}

TEST_F(StructuredOutputTest, BadConstraintsAreRefusedNamingTheField) {
  const struct {
    Json extra;
    std::string param;
  } cases[] = {
      {{{"grammar", "root ::= \"a"}}, "grammar"},
      {{{"grammar", "start ::= \"a\""}}, "grammar"},
      {{{"regex", "(a"}}, "regex"},
      {{{"response_format", {{"type", "xml"}}}}, "response_format.type"},
      {{{"response_format", {{"type", "json_schema"}}}}, "response_format.json_schema"},
      {{{"response_format", {{"type", "json_schema"}, {"json_schema", {{"name", "x"}}}}}},
       "response_format.json_schema.schema"},
      {{{"response_format", {{"type", "json_schema"},
                             {"json_schema", {{"name", "x"}, {"schema", {{"type", "object"}, {"not", {{"type", "string"}}}}}}}}}},
       "response_format.json_schema.schema.not"},
      {{{"grammar", "root ::= \"a\""}, {"regex", "a"}}, "regex"},
  };
  for (const auto& c : cases) {
    Json body = {{"prompt", "Once"}, {"max_tokens", 8}};
    body.update(c.extra);
    SCOPED_TRACE(body.dump());
    const Reply r = Post(server_->http_port(), "/v1/completions", body);
    EXPECT_EQ(r.status, 400) << r.raw;
    EXPECT_EQ(r.body["error"]["param"], c.param) << r.raw;
  }
  // gRPC names the proto field.
  auto stub = server_->NewStub();
  v1::GenerateRequest request = GreedyRequest("Once", v1::DECODING_MODE_AR, 8, 4);
  request.mutable_structured_output()->set_grammar("root ::= (");
  const StreamResult grpc = RunGenerate(*stub, request);
  EXPECT_EQ(grpc.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(grpc.status.error_message().rfind("structured_output.grammar: ", 0), 0u) << grpc.status.error_message();
  // The server goes on serving.
  const Reply ok = Post(server_->http_port(), "/v1/completions", {{"prompt", "Once"}, {"max_tokens", 4}});
  EXPECT_EQ(ok.status, 200) << ok.raw;
}

// A model with a 128k byte-level BPE vocabulary (tokens of up to 12 bytes that span
// JSON's symbols and split UTF-8 characters) and a random adapter: the same guarantees,
// in every mode.
TEST(StructuredOutputLargeVocabTest, EveryReplyValidatesAgainstItsSchemaAt128kTokens) {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("crossreg_vocab128k_" + std::to_string(getpid()));
  std::filesystem::create_directories(dir / "adapter");
  const std::string path = (dir / "model.gguf").string();
  ASSERT_TRUE(TinyLlamaGgufLargeVocab(128000, 2048, 5).WriteFile(path).ok());
  auto model = LoadModel(path);
  ASSERT_TRUE(model.ok()) << model.status();
  RandomLoraOptions options;
  options.magnitude = 0.5f;
  options.seed = 21;
  auto adapter = MakeRandomLoraAdapter((*model)->config, options);
  ASSERT_TRUE(WritePeftAdapter(*adapter, (*model)->config, (dir / "adapter").string()).ok());
  ServerProcess server({"--adapter=" + (dir / "adapter").string()}, path);
  ASSERT_TRUE(server.Start()) << server.Log();
  ExpectEverySchemaHolds(server, {0, 1, 2});
  EXPECT_EQ(server.Terminate(), 0);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace crossreg::testing
