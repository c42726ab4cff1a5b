// The HTTP front door's pure parts: JSON bodies into requests (field names in
// errors), and chat templates rendered exactly as each family writes its prompt.
#include "gtest/gtest.h"
#include "server/http/chat_template.h"
#include "server/http/openai_request.h"

namespace crossreg::server {
namespace {

const std::vector<ChatMessage> kConversation = {{"system", "Be brief."},
                                                {"user", " Hi there "},
                                                {"assistant", "Hello."},
                                                {"user", "Tell me a joke."}};

ChatTemplate Family(ChatTemplateFamily family) {
  ChatTemplate t;
  t.family = family;
  t.bos = "<s>";
  t.eos = "</s>";
  return t;
}

TEST(ChatTemplateTest, RecognisesTheFamiliesByTheirMarkers) {
  EXPECT_EQ(RecognizeChatTemplate("{{'<|start_header_id|>' + r + '<|end_header_id|>'}}{{'<|eot_id|>'}}", "", "").family,
            ChatTemplateFamily::kLlama3);
  EXPECT_EQ(RecognizeChatTemplate("{{ '[INST] <<SYS>>' }} [/INST]", "", "").family, ChatTemplateFamily::kLlama2);
  EXPECT_EQ(RecognizeChatTemplate("{{ '[INST] ' + m + ' [/INST]' }}", "", "").family, ChatTemplateFamily::kMistral);
  const ChatTemplate qwen =
      RecognizeChatTemplate("You are a helpful assistant.<|im_start|>{{ role }}<|im_end|>", "", "");
  EXPECT_EQ(qwen.family, ChatTemplateFamily::kChatMl);
  EXPECT_TRUE(qwen.default_system);
  EXPECT_EQ(RecognizeChatTemplate("", "", "").family, ChatTemplateFamily::kNone);
  EXPECT_EQ(RecognizeChatTemplate("{{ messages }}", "", "").family, ChatTemplateFamily::kNone);
}

TEST(ChatTemplateTest, Llama3) {
  ChatTemplate t = Family(ChatTemplateFamily::kLlama3);
  t.bos = "<|begin_of_text|>";
  EXPECT_EQ(*RenderChat(t, kConversation),
            "<|begin_of_text|>"
            "<|start_header_id|>system<|end_header_id|>\n\nBe brief.<|eot_id|>"
            "<|start_header_id|>user<|end_header_id|>\n\nHi there<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\nHello.<|eot_id|>"
            "<|start_header_id|>user<|end_header_id|>\n\nTell me a joke.<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\n");
}

TEST(ChatTemplateTest, Llama2FoldsTheSystemPromptIntoTheFirstTurn) {
  // The template strips the whole first turn (system block + user text), not the
  // user text alone: its leading space stays.
  EXPECT_EQ(*RenderChat(Family(ChatTemplateFamily::kLlama2), kConversation),
            "<s>[INST] <<SYS>>\nBe brief.\n<</SYS>>\n\n Hi there [/INST] Hello. </s><s>[INST] Tell me a joke. [/INST]");
}

TEST(ChatTemplateTest, Mistral) {
  EXPECT_EQ(*RenderChat(Family(ChatTemplateFamily::kMistral), kConversation),
            "<s>[INST] Be brief.\n\n Hi there  [/INST]Hello.</s>[INST] Tell me a joke. [/INST]");
}

TEST(ChatTemplateTest, ChatMlWithAndWithoutQwensDefaultSystemMessage) {
  ChatTemplate t = Family(ChatTemplateFamily::kChatMl);
  const std::vector<ChatMessage> user_only = {{"user", "Hi"}};
  EXPECT_EQ(*RenderChat(t, user_only), "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
  t.default_system = true;
  EXPECT_EQ(*RenderChat(t, user_only),
            "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"
            "<|im_start|>assistant\n");
}

TEST(ChatTemplateTest, InstTemplatesNeedAlternatingTurnsEndingWithTheUser) {
  const ChatTemplate t = Family(ChatTemplateFamily::kLlama2);
  auto two_users = RenderChat(t, {{"user", "a"}, {"user", "b"}});
  EXPECT_EQ(two_users.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(two_users.status().message().rfind("messages[1].role", 0), 0u) << two_users.status();
  EXPECT_FALSE(RenderChat(t, {{"user", "a"}, {"assistant", "b"}}).ok());
  EXPECT_EQ(RenderChat(Family(ChatTemplateFamily::kNone), {{"user", "a"}}).status().code(),
            absl::StatusCode::kFailedPrecondition);
}

TEST(OpenAiRequestTest, FieldsMapToTheGenerateRequest) {
  auto r = ParseOpenAiRequest(R"({"model": "m", "prompt": "Hello", "max_tokens": 7, "temperature": 0.5,
      "top_p": 0.9, "top_k": -1, "seed": 3, "stop": ["a", "b"], "stream": true,
      "stream_options": {"include_usage": true}, "mode": "lossy", "beta": 0.5, "tau": -1, "gamma": 6,
      "fork_outcomes": 2, "fork_depth": 3, "ngram_assist": true, "adaptive_gamma": false, "n": 1,
      "presence_penalty": 0, "user": "ignored"})",
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
  EXPECT_EQ(parts->messages[0].content, "ab");
}

TEST(OpenAiRequestTest, ProtoFieldNamesBecomeJsonNames) {
  EXPECT_EQ(InJsonTerms("decoding.beta: must be in [0, 1), got 1", OpenAiEndpoint::kCompletions),
            "beta: must be in [0, 1), got 1");
  EXPECT_EQ(InJsonTerms("sampling.max_tokens: must be >= 1", OpenAiEndpoint::kCompletions), "max_tokens: must be >= 1");
  EXPECT_EQ(InJsonTerms("prompt.token_ids: id 9 outside", OpenAiEndpoint::kCompletions), "prompt: id 9 outside");
  EXPECT_EQ(InJsonTerms("prompt: 3000 tokens", OpenAiEndpoint::kChatCompletions), "messages: 3000 tokens");
  EXPECT_EQ(InJsonTerms("request queue full", OpenAiEndpoint::kCompletions), "request queue full");
}

}  // namespace
}  // namespace crossreg::server
