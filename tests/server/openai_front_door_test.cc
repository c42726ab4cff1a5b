// The HTTP front door's pure parts: JSON bodies into requests (field names in
// errors), the chat conversation and its tools checked field by field.
#include "engine/field_violation.h"
#include "gtest/gtest.h"
#include "server/http/openai_response.h"
#include "server/http/openai_request.h"

namespace crossreg::server {
namespace {

TEST(OpenAiRequestTest, FieldsMapToTheGenerateRequest) {
  auto r = ParseOpenAiRequest(R"({"model": "m", "prompt": "Hello", "max_tokens": 7, "temperature": 0.5,
      "top_p": 0.9, "top_k": -1, "seed": 3, "stop": ["a", "b"], "stream": true,
      "stream_options": {"include_usage": true}, "mode": "lossy", "beta": 0.5, "tau": -1, "gamma": 6,
      "fork_outcomes": 2, "fork_depth": 3, "ngram_assist": true, "adaptive_gamma": false, "n": 1,
      "presence_penalty": 0, "user": "ignored", "draft_layout": "blocks"})",
                              OpenAiEndpoint::kCompletions);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->model, "m");
  EXPECT_TRUE(r->stream);
  EXPECT_TRUE(r->include_usage);
  const v1::GenerateRequest& p = r->proto;
  EXPECT_EQ(p.text(), "Hello");
  EXPECT_EQ(p.sampling().max_tokens(), 7);
  EXPECT_FLOAT_EQ(p.sampling().temperature(), 0.5f);
  EXPECT_FLOAT_EQ(p.sampling().top_p(), 0.9f);
  EXPECT_EQ(p.sampling().top_k(), 0);
  EXPECT_EQ(p.sampling().seed(), 3u);
  EXPECT_EQ(p.sampling().stop_size(), 2);
  EXPECT_EQ(p.decoding().mode(), v1::DECODING_MODE_LOSSY);
  EXPECT_FLOAT_EQ(p.decoding().beta(), 0.5f);
  EXPECT_FLOAT_EQ(p.decoding().tau(), -1.0f);
  EXPECT_EQ(p.decoding().gamma(), 6);
  EXPECT_EQ(p.decoding().fork_outcomes(), 2);
  EXPECT_EQ(p.decoding().fork_depth(), 3);
  EXPECT_EQ(p.decoding().draft_layout(), v1::DRAFT_LAYOUT_BLOCKS);
  EXPECT_EQ(ParseOpenAiRequest(R"({"prompt": "x", "mode": "lossless", "sampled_verification": "speculative_sampling"})",
                               OpenAiEndpoint::kCompletions)
                ->proto.decoding()
                .sampled_verification(),
            v1::SAMPLED_VERIFICATION_SPECULATIVE_SAMPLING);
  EXPECT_TRUE(p.decoding().ngram_assist());
  EXPECT_TRUE(p.decoding().has_adaptive_gamma());
  EXPECT_FALSE(p.decoding().adaptive_gamma());
  // OpenAI's default temperature is 1.
  EXPECT_FLOAT_EQ(ParseOpenAiRequest(R"({"prompt": "x"})", OpenAiEndpoint::kCompletions)->proto.sampling().temperature(),
                  1.0f);
}

TEST(OpenAiRequestTest, ErrorsNameTheJsonField) {
  const std::pair<const char*, const char*> cases[] = {
      {"[1, 2]", "body:"},
      {R"({"prompt": 5})", "prompt:"},
      {R"({"prompt": [1, "a"]})", "prompt[1]:"},
      {R"({"prompt": ["a", "b"]})", "prompt:"},
      {R"({"prompt": "x", "n": 3})", "n:"},
      {R"({"prompt": "x", "max_tokens": 1.5})", "max_tokens:"},
      {R"({"prompt": "x", "stream": "yes"})", "stream:"},
      {R"({"prompt": "x", "stop": [1]})", "stop[0]:"},
      {R"({"prompt": "x", "mode": "fast"})", "mode:"},
      {R"({"prompt": "x", "tools": []})", "tools:"},
      {R"({"prompt": "x", "echo": true})", "echo:"},
  };
  for (const auto& [body, field] : cases) {
    auto r = ParseOpenAiRequest(body, OpenAiEndpoint::kCompletions);
    ASSERT_FALSE(r.ok()) << body;
    EXPECT_EQ(r.status().message().rfind(field, 0), 0u) << body << " -> " << r.status();
  }
  auto chat = ParseOpenAiRequest(R"({"messages": [{"role": "user", "content": [{"type": "image_url"}]}]})",
                                 OpenAiEndpoint::kChatCompletions);
  EXPECT_EQ(chat.status().message().rfind("messages[0].content[0]:", 0), 0u) << chat.status();
  EXPECT_EQ(ParseOpenAiRequest("{}", OpenAiEndpoint::kChatCompletions).status().message().rfind("messages:", 0), 0u);
  auto parts = ParseOpenAiRequest(
      R"({"messages": [{"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}]})",
      OpenAiEndpoint::kChatCompletions);
  ASSERT_TRUE(parts.ok()) << parts.status();
  EXPECT_EQ(parts->chat.messages[0]["content"], "ab");
}

// The refusal's whole message, or "accepted".
std::string Refusal(const std::string& body, OpenAiEndpoint endpoint = OpenAiEndpoint::kCompletions,
                    OpenAiParseOptions options = {}) {
  auto r = ParseOpenAiRequest(body, endpoint, options);
  if (r.ok()) return "accepted";
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << body;
  return std::string(r.status().message());
}

const OpenAiParseOptions kIgnoreUnknown = {/*ignore_unknown_fields=*/true};

TEST(OpenAiRequestTest, UnknownFieldsAreRefusedByNameWithTheNearestKnownOne) {
  const std::string typos = R"({"prompt": "def f():", "temprature": 0, "max_token": 5})";
  // In the order the body has them.
  EXPECT_EQ(Refusal(typos), "temprature: unknown field (did you mean \"temperature\"?); "
                            "max_token: unknown field (did you mean \"max_tokens\"?)");
  // Far from every known name, or too short to be a typo of one: no suggestion.
  EXPECT_EQ(Refusal(R"({"prompt": "x", "frobnicate": 1})"), "frobnicate: unknown field");
  EXPECT_EQ(Refusal(R"({"prompt": "x", "x": 1})"), "x: unknown field");
  EXPECT_EQ(Refusal(R"({"prompt": "x", "tua": -1})"), "tua: unknown field (did you mean \"tau\"?)");
  // Keys that are not names are quoted, so that the message stays one readable line.
  EXPECT_EQ(Refusal(R"({"prompt": "x", "a b\n": 1})"), R"("a b\n": unknown field)");
  EXPECT_EQ(Refusal(R"({"prompt": "x", "a": 1, "b": 2, "c": 3, "d": 4, "e": 5, "f": 6, "g": 7})"),
            "a: unknown field; b: unknown field; c: unknown field; d: unknown field; e: unknown field; "
            "and 2 more unknown fields");
  // The other endpoint's prompt field is named with where it belongs.
  EXPECT_EQ(Refusal(R"({"prompt": "x", "messages": []})").rfind("messages: unknown field (/v1/completions takes", 0),
            0u);
  EXPECT_EQ(Refusal(R"({"prompt": "x", "messages": []})", OpenAiEndpoint::kChatCompletions)
                .rfind("prompt: unknown field (/v1/chat/completions takes", 0),
            0u);

  auto ignored = ParseOpenAiRequest(typos, OpenAiEndpoint::kCompletions, kIgnoreUnknown);
  ASSERT_TRUE(ignored.ok()) << ignored.status();
  EXPECT_EQ(ignored->proto.text(), "def f():");
  EXPECT_FLOAT_EQ(ignored->proto.sampling().temperature(), 1.0f);
  EXPECT_FALSE(ignored->proto.sampling().has_max_tokens());
}

TEST(OpenAiRequestTest, UnknownFieldsInsideObjectsAreNamedWithTheirPath) {
  const OpenAiEndpoint chat = OpenAiEndpoint::kChatCompletions;
  const std::string misspelt_content = R"({"messages": [{"role": "user", "contnt": "Hi"}]})";
  EXPECT_EQ(Refusal(misspelt_content, chat), "messages[0].contnt: unknown field (did you mean \"content\"?)");
  const std::string extra_in_part =
      R"({"messages": [{"role": "user", "content": [{"type": "text", "text": "a", "cache_control": {}}]}]})";
  EXPECT_EQ(Refusal(extra_in_part, chat), "messages[0].content[0].cache_control: unknown field");
  const std::string stream_options = R"({"prompt": "x", "stream": true, "stream_options": {"include_usag": true}})";
  EXPECT_EQ(Refusal(stream_options), "stream_options.include_usag: unknown field (did you mean \"include_usage\"?)");

  // Ignored, the misspelt field leaves the message without the content it needs.
  EXPECT_EQ(Refusal(misspelt_content, chat, kIgnoreUnknown), "messages[0].content: required");
  EXPECT_EQ(Refusal(R"({"messages": [{"role": "user", "content": "Hi", "cache": 1}]})", chat, kIgnoreUnknown),
            "accepted");
  EXPECT_EQ(Refusal(extra_in_part, chat, kIgnoreUnknown), "accepted");
  EXPECT_EQ(Refusal(stream_options, OpenAiEndpoint::kCompletions, kIgnoreUnknown), "accepted");
}

TEST(OpenAiRequestTest, StandardOpenAiFieldsAreKnownAndKeepTheirRules) {
  // At their defaults, OpenAI's options crossreg does not implement are accepted; `user` always is.
  EXPECT_EQ(Refusal(R"({"prompt": "x", "user": "u1", "n": 1, "best_of": 1, "presence_penalty": 0,
      "frequency_penalty": 0.0, "echo": false, "logprobs": 0, "top_logprobs": null})"),
            "accepted");
  EXPECT_EQ(Refusal(R"({"messages": [{"role": "user", "content": "x"}], "logprobs": false,
      "max_completion_tokens": 4})",
                    OpenAiEndpoint::kChatCompletions),
            "accepted");
  EXPECT_EQ(Refusal(R"({"prompt": "x", "suffix": "y"})"), "suffix: not supported");
  EXPECT_EQ(Refusal(R"({"prompt": "x", "echo": "no"})"), "echo: must be false, got a string");
  // Penalties, biases, min_p and log-probabilities, as the OpenAI Python client sends them.
  EXPECT_EQ(Refusal(R"({"prompt": "x", "logit_bias": {"1": 5, "20": -100}, "presence_penalty": 0.5,
      "frequency_penalty": -0.5, "logprobs": 2, "seed": 7, "stop": ["\n"], "min_p": 0.1,
      "repetition_penalty": 1.1, "logprobs_mode": "processed"})"),
            "accepted");
  EXPECT_EQ(Refusal(R"({"messages": [{"role": "user", "content": "x"}], "logprobs": true, "top_logprobs": 5,
      "presence_penalty": 1, "logit_bias": {"3": 2.5}})",
                    OpenAiEndpoint::kChatCompletions),
            "accepted");
  EXPECT_EQ(Refusal(R"({"prompt": "x", "presence_penalty": 2.5})"), "presence_penalty: must be in [-2, 2], got 2.5");
  EXPECT_EQ(Refusal(R"({"prompt": "x", "logprobs": 21})"), "logprobs: must be in [0, 20], got 21");
  EXPECT_EQ(Refusal(R"({"prompt": "x", "logprobs": true})"),
            "logprobs: on /v1/completions a count of top tokens in [0, 20], not a boolean");
  EXPECT_EQ(Refusal(R"({"prompt": "x", "top_logprobs": 2})"),
            "top_logprobs: not a /v1/completions field: \"logprobs\": N asks for the top N");
  EXPECT_EQ(Refusal(R"({"messages": [{"role": "user", "content": "x"}], "top_logprobs": 2})",
                    OpenAiEndpoint::kChatCompletions),
            "top_logprobs: needs \"logprobs\": true");
  for (const char* key : {"a", "05", " 5", "+5", "5 ", "-1", "1e3"}) {
    EXPECT_EQ(Refusal(absl::StrCat(R"({"prompt": "x", "logit_bias": {")", key, R"(": 5}})")),
              absl::StrCat("logit_bias[\"", key,
                           "\"]: the key must be a token id written in decimal without sign, spaces or leading zeros"));
  }
  EXPECT_EQ(Refusal(R"({"prompt": "x", "logit_bias": {"5": 1, "5": 2}})"),
            "logit_bias.5: duplicate member name (each may appear once)");
  EXPECT_EQ(Refusal(R"({"prompt": "x", "logit_bias": {"4": 500}})"), "logit_bias[\"4\"]: must be in [-100, 100], got 500");
  EXPECT_EQ(Refusal(R"({"prompt": "x", "logit_bias": [1]})"),
            "logit_bias: must be an object of token id -> bias, got an array");
  EXPECT_EQ(Refusal(R"({"prompt": "x", "min_p": 2})"), "min_p: must be in [0, 1], got 2");
  EXPECT_EQ(Refusal(R"({"prompt": "x", "repetition_penalty": 0})"), "repetition_penalty: must be > 0 (1: off), got 0");
  EXPECT_EQ(Refusal(R"({"prompt": "x", "logprobs_mode": "log"})"),
            "logprobs_mode: must be \"raw\" or \"processed\", got \"log\"");
  EXPECT_EQ(Refusal(R"({"prompt": "x", "best_of": 2})"), "best_of: only best_of = 1 is supported, got 2");
  // Even when unknown fields are ignored, these are refused: they are known, and not done.
  EXPECT_EQ(Refusal(R"({"prompt": "x", "suffix": "y"})", OpenAiEndpoint::kCompletions, kIgnoreUnknown),
            "suffix: not supported");
}

TEST(OpenAiRequestTest, EveryNumberIsRangeCheckedByName) {
  const std::pair<const char*, const char*> cases[] = {
      {R"("top_k": -2)", "top_k: must be in [-1, 2147483647] (-1 or 0: no cut), got -2"},
      {R"("top_k": 2147483648)", "top_k: must be in [-1, 2147483647] (-1 or 0: no cut), got 2147483648"},
      {R"("seed": -1)", "seed: must be in [0, 18446744073709551615], got -1"},
      {R"("seed": 1.5)", "seed: must be an integer, got 1.5"},
      {R"("seed": 1e300)", "seed: must be in [0, 18446744073709551615], got 1e+300"},
      {R"("temperature": -0.5)", "temperature: must be >= 0 (0: greedy), got -0.5"},
      {R"("temperature": 1e39)", "temperature: out of range, got 1e+39"},
      {R"("temperature": "hot")", "temperature: must be a number, got a string"},
      {R"("top_p": 0)", "top_p: must be in (0, 1], got 0"},
      {R"("top_p": 1.5)", "top_p: must be in (0, 1], got 1.5"},
      {R"("max_tokens": 0)", "max_tokens: must be in [1, 2147483647], got 0"},
      {R"("max_tokens": 2147483648)", "max_tokens: must be in [1, 2147483647], got 2147483648"},
      {R"("max_tokens": 18446744073709551615)", "max_tokens: must be in [1, 2147483647], got 18446744073709551615"},
      {R"("max_tokens": 5.5)", "max_tokens: must be an integer, got 5.5"},
      {R"("max_completion_tokens": 0)", "max_completion_tokens: must be in [1, 2147483647], got 0"},
      {R"("max_tokens": 5, "max_completion_tokens": 6)",
       "max_completion_tokens: is 6 but max_tokens is 5 (give one of them)"},
      {R"("mode": "lossy", "beta": 1)", "beta: must be in [0, 1), got 1"},
      {R"("mode": "lossy", "beta": 0.99999999999)", "beta: must be in [0, 1), got 0.99999999999"},
      {R"("mode": "lossy", "tau": 0.5)", "tau: must be <= 0 (nats), got 0.5"},
      {R"("gamma": -1)", "gamma: must be in [0, 2147483647], got -1"},
      {R"("fork_outcomes": -1)", "fork_outcomes: must be in [0, 2147483647], got -1"},
      {R"("fork_depth": 1.5)", "fork_depth: must be an integer, got 1.5"},
      {R"("draft_layout": "tree")", "draft_layout: unknown draft layout \"tree\" (use chain or blocks)"},
      {R"("draft_layout": 2)", "draft_layout: must be a string, got a number"},
      {R"("sampled_verification": "exact")",
       "sampled_verification: unknown rule \"exact\" (use seed_exact, seed_exact_argmax or speculative_sampling)"},
      {R"("n": 18446744073709551615)", "n: only n = 1 is supported, got 18446744073709551615"},
      {R"("n": 1.5)", "n: only n = 1 is supported, got 1.5"},
  };
  for (const auto& [fields, message] : cases) {
    EXPECT_EQ(Refusal(absl::StrCat(R"({"prompt": "x", )", fields, "}")), message) << fields;
  }
  EXPECT_EQ(Refusal(R"({"prompt": [18446744073709551615]})"),
            "prompt[0]: token id out of range, got 18446744073709551615");
  EXPECT_EQ(Refusal(R"({"prompt": [-2147483649]})"), "prompt[0]: token id out of range, got -2147483649");

  // The edges themselves, and integers written as floats without a fraction.
  auto r = ParseOpenAiRequest(R"({"prompt": "x", "top_k": -1, "seed": 18446744073709551615, "temperature": 0,
      "top_p": 1, "max_tokens": 5.0, "max_completion_tokens": 5, "gamma": 0, "tau": 0, "beta": 0})",
                              OpenAiEndpoint::kCompletions);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->proto.sampling().top_k(), 0);
  EXPECT_EQ(r->proto.sampling().seed(), 18446744073709551615u);
  EXPECT_EQ(r->proto.sampling().max_tokens(), 5);
  auto float_seed = ParseOpenAiRequest(R"({"prompt": "x", "seed": 7.0})", OpenAiEndpoint::kCompletions);
  ASSERT_TRUE(float_seed.ok()) << float_seed.status();
  EXPECT_EQ(float_seed->proto.sampling().seed(), 7u);
}

TEST(OpenAiRequestTest, StreamOptionsNeedAStream) {
  EXPECT_EQ(Refusal(R"({"prompt": "x", "stream_options": {"include_usage": true}})"),
            "stream_options: only allowed when stream is true");
  EXPECT_EQ(Refusal(R"({"prompt": "x", "stream": false, "stream_options": {}})"),
            "stream_options: only allowed when stream is true");
  EXPECT_EQ(Refusal(R"({"prompt": "x", "stream_options": null})"), "accepted");
  EXPECT_EQ(Refusal(R"({"prompt": "x", "stream": true, "stream_options": {"include_usage": false}})"), "accepted");
  EXPECT_EQ(Refusal(R"({"prompt": "x", "stream": true, "stream_options": []})"),
            "stream_options: must be an object, got an array");
}

TEST(OpenAiRequestTest, SyntaxErrorsNameTheFieldWhoseValueBrokeThem) {
  EXPECT_EQ(Refusal(R"({"prompt": "x", "temperature": 1e400})"), "temperature: number out of range (1e400)");
  EXPECT_EQ(Refusal(R"({"prompt": "x", "temperature": -1e400})", OpenAiEndpoint::kCompletions, kIgnoreUnknown),
            "temperature: number out of range (-1e400)");
  EXPECT_EQ(Refusal(R"({"prompt": [1, 2, 1e999]})"), "prompt[2]: number out of range (1e999)");
  EXPECT_EQ(Refusal(R"({"messages": [{"role": "user", "content": [{"type": "text", "text": tru}]}]})",
                    OpenAiEndpoint::kChatCompletions)
                .rfind("messages[0].content[0].text: not valid JSON (", 0),
            0u);
  // Between values: the enclosing object, or the body.
  EXPECT_EQ(Refusal(R"({"prompt": "x", "stream": true, "stream_options": {"include_usage": true,}})")
                .rfind("stream_options: not valid JSON (", 0),
            0u);
  EXPECT_EQ(Refusal(R"({"prompt": "x",})").rfind("body: not valid JSON (", 0), 0u);
  EXPECT_EQ(Refusal(R"({"prompt": "x"} trailing)").rfind("body: not valid JSON (", 0), 0u);
  EXPECT_EQ(Refusal("").rfind("body: not valid JSON (", 0), 0u);
  EXPECT_EQ(Refusal("[1e400]"), "body[0]: number out of range (1e400)");
}

// Fields are renamed as data: the renamed error names its new field, keeps its code
// and its problem, and an error that names no field passes through.
TEST(OpenAiRequestTest, ProtoFieldNamesBecomeJsonNames) {
  struct Case {
    absl::Status error;
    OpenAiEndpoint endpoint;
    std::string field, message;
  };
  const Case cases[] = {
      {FieldViolation("decoding.beta", "must be in [0, 1), got 1"), OpenAiEndpoint::kCompletions, "beta",
       "beta: must be in [0, 1), got 1"},
      {FieldViolation("sampling.max_tokens", "must be >= 1"), OpenAiEndpoint::kCompletions, "max_tokens",
       "max_tokens: must be >= 1"},
      {FieldViolation("prompt.token_ids", "id 9 outside"), OpenAiEndpoint::kCompletions, "prompt",
       "prompt: id 9 outside"},
      {FieldViolation("prompt", "3000 tokens"), OpenAiEndpoint::kChatCompletions, "messages", "messages: 3000 tokens"},
      {FieldViolation("sampling.stop[2]", "empty"), OpenAiEndpoint::kCompletions, "stop[2]", "stop[2]: empty"},
      // A field whose name only starts like a renamed one keeps its name.
      {FieldViolation("sampling.topper", "x"), OpenAiEndpoint::kCompletions, "sampling.topper", "sampling.topper: x"},
      {FieldError(absl::StatusCode::kFailedPrecondition, "decoding.adaptive_gamma", "no curve"),
       OpenAiEndpoint::kCompletions, "adaptive_gamma", "adaptive_gamma: no curve"},
  };
  for (const Case& c : cases) {
    const absl::Status renamed = InJsonTerms(c.error, c.endpoint);
    EXPECT_EQ(renamed.code(), c.error.code());
    EXPECT_EQ(renamed.message(), c.message);
    EXPECT_EQ(ViolatedField(renamed), c.field);
    EXPECT_EQ(ErrorJson(400, renamed)["error"]["param"], c.field);
  }
  const absl::Status plain = absl::ResourceExhaustedError("request queue full");
  EXPECT_EQ(InJsonTerms(plain, OpenAiEndpoint::kCompletions), plain);
  EXPECT_TRUE(ErrorJson(429, plain)["error"]["param"].is_null());
  // A message that merely looks like "field: problem" names no field.
  EXPECT_TRUE(ErrorJson(400, absl::InvalidArgumentError("beta: 1"))["error"]["param"].is_null());
}

}  // namespace
}  // namespace crossreg::server
