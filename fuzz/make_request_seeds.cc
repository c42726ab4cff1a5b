// Seeds for the request fuzzers: crossreg.v1.GenerateRequest messages as a gRPC client
// serializes them (text and token-id prompts, every decoding mode, sampling fields,
// stop strings; some that RequestFromProto refuses) for fuzz_request, and OpenAI
// bodies for both endpoints (streaming, the decoding extensions, content parts) for
// fuzz_openai_request. Token ids lie in the tiny vocabularies of fuzz/tiny_server.h.
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "crossreg/v1/generation.pb.h"
#include "engine/status_macros.h"
#include "fuzz/seed_writer.h"

namespace crossreg::fuzz {
namespace {

std::vector<std::pair<std::string, v1::GenerateRequest>> GenerateRequests() {
  std::vector<std::pair<std::string, v1::GenerateRequest>> out;
  auto add = [&out](const std::string& name) -> v1::GenerateRequest& {
    out.emplace_back(name, v1::GenerateRequest());
    return out.back().second;
  };
  {
    v1::GenerateRequest& r = add("text_ar");
    r.set_text("Once upon a time");
    r.mutable_sampling()->set_temperature(0);
    r.mutable_sampling()->set_max_tokens(16);
    r.mutable_decoding()->set_mode(v1::DECODING_MODE_AR);
  }
  {
    v1::GenerateRequest& r = add("token_ids_lossless");
    for (int32_t id : {1, 290, 300, 45}) r.mutable_token_ids()->add_ids(id);
    r.mutable_sampling()->set_max_tokens(8);
    r.mutable_decoding()->set_mode(v1::DECODING_MODE_LOSSLESS);
    r.mutable_decoding()->set_gamma(4);
  }
  {
    v1::GenerateRequest& r = add("lossy_forked");
    r.set_request_id("req-lossy-1");
    r.set_text("the cat was up");
    r.mutable_sampling()->set_temperature(0.7f);
    r.mutable_sampling()->set_seed(42);
    auto* d = r.mutable_decoding();
    d->set_mode(v1::DECODING_MODE_LOSSY);
    d->set_beta(0.5f);
    d->set_tau(-1.0f);
    d->set_gamma(6);
    d->set_fork_outcomes(2);
    d->set_fork_depth(3);
    d->set_ngram_assist(true);
  }
  {
    v1::GenerateRequest& r = add("ngram");
    for (int32_t id : {1, 100, 101, 100, 101}) r.mutable_token_ids()->add_ids(id);
    r.mutable_decoding()->set_mode(v1::DECODING_MODE_NGRAM);
    r.mutable_decoding()->set_gamma(8);
    r.mutable_decoding()->set_adaptive_gamma(false);
  }
  {
    v1::GenerateRequest& r = add("stop_strings");
    r.set_text("and then");
    auto* s = r.mutable_sampling();
    s->set_temperature(1.0f);
    s->set_top_k(5);
    s->set_top_p(0.9f);
    s->set_seed(7);
    s->set_ignore_eos(true);
    for (const char* stop : {"\n", "the end", "caf\xC3\xA9"}) s->add_stop(stop);
  }
  {
    v1::GenerateRequest& r = add("adaptive_gamma");
    r.set_text("time");
    r.mutable_decoding()->set_mode(v1::DECODING_MODE_LOSSLESS);
    r.mutable_decoding()->set_adaptive_gamma(true);  // no cost curve: FAILED_PRECONDITION
  }
  {
    v1::GenerateRequest& r = add("text_over_limit");
    r.set_text(std::string(600, 'a'));
  }
  {
    v1::GenerateRequest& r = add("gamma_too_big");
    r.mutable_token_ids()->add_ids(1);
    r.mutable_decoding()->set_mode(v1::DECODING_MODE_LOSSLESS);
    r.mutable_decoding()->set_gamma(99);
  }
  {
    v1::GenerateRequest& r = add("special_text");
    r.set_text("<s>hi</s><|endoftext|>");
    r.mutable_sampling()->set_max_tokens(1);
  }
  return out;
}

// name, body (written as a client would send it).
const std::vector<std::pair<std::string, std::string>>& OpenAiBodies() {
  static const std::vector<std::pair<std::string, std::string>> bodies = {
      {"completion_text", R"({"model": "tiny", "prompt": "Once upon a time", "max_tokens": 16, "temperature": 0})"},
      {"completion_ids", R"({"prompt": [1, 290, 300], "max_tokens": 8, "mode": "lossless", "gamma": 4})"},
      {"completion_stream",
       R"({"prompt": "hi", "stream": true, "stream_options": {"include_usage": true}, "return_token_ids": true,
           "request_id": "req-7"})"},
      {"completion_lossy",
       R"({"prompt": ["the cat"], "mode": "lossy", "beta": 0.25, "tau": -0.5, "gamma": 6, "fork_outcomes": 2,
           "fork_depth": 3, "ngram_assist": true, "adaptive_gamma": false, "seed": 3, "top_p": 0.95, "top_k": -1})"},
      {"completion_unsupported", R"({"prompt": "a", "n": 2, "logprobs": true, "best_of": 1})"},
      {"completion_stop", R"({"prompt": "and", "stop": ["\n", "end"], "ignore_eos": true, "n": 1, "presence_penalty": 0})"},
      {"completion_penalties", R"({"prompt": "a", "presence_penalty": 0.5, "frequency_penalty": 1, "repetition_penalty": 1.2, "min_p": 0.05, "logit_bias": {"3": -100, "7": 2}, "logprobs": 3, "logprobs_mode": "processed"})"},
      {"chat_logprobs", R"({"messages": [{"role": "user", "content": "hi"}], "logprobs": true, "top_logprobs": 4, "logit_bias": {"1": 1}})"},
      {"chat_basic",
       R"({"messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hello"}],
           "max_completion_tokens": 8})"},
      {"chat_turns",
       R"({"messages": [{"role": "user", "content": "Hello"}, {"role": "assistant", "content": "Hi there."},
                        {"role": "user", "content": [{"type": "text", "text": "What is "}, {"type": "text", "text": "up?"}]}],
           "temperature": 0.5})"},
      {"chat_stream",
       R"({"model": "tiny", "messages": [{"role": "user", "content": "Hello"}], "stream": true,
           "stream_options": {"include_usage": false}, "mode": "ngram", "stop": ".", "seed": 11, "n": 1})"},
      {"chat_lossless",
       R"({"messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"},
                        {"role": "assistant", "content": "Hello."}, {"role": "user", "content": "More"}],
           "mode": "lossless", "gamma": 16, "max_tokens": 4})"},
      {"chat_assistant_last",
       R"({"messages": [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": null}],
           "return_token_ids": true})"},
      {"chat_special_text",
       R"({"messages": [{"role": "user", "content": "<s>[INST] hi [/INST]</s><|im_end|><|eot_id|><|endoftext|>"}]})"},
  };
  return bodies;
}

}  // namespace

absl::Status WriteRequestSeeds(SeedWriter& seeds) {
  for (const auto& [name, request] : GenerateRequests()) {
    RETURN_IF_ERROR(seeds.Add("fuzz_request", name, request.SerializeAsString()));
  }
  v1::AbortRequest abort;
  abort.set_request_id("req-lossy-1");
  RETURN_IF_ERROR(seeds.Add("fuzz_request", "abort", abort.SerializeAsString()));
  for (const auto& [name, body] : OpenAiBodies()) {
    RETURN_IF_ERROR(seeds.Add("fuzz_openai_request", name + ".json", body));
  }
  return absl::OkStatus();
}

}  // namespace crossreg::fuzz
