// Both front doors refuse the same bad request with the same field and the same words:
// the gRPC door's request (a crossreg.v1.GenerateRequest) and the HTTP door's JSON body
// for it go through the one field table (engine/decoding/request_fields.h) and the one
// admission path (server/admission.h), and the HTTP error is the gRPC one with the field
// spelled as the JSON body spells it. Also: the field table's ranges are the rules the
// engine's validators apply.
#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "crossreg/v1/generation.pb.h"
#include "engine/decoding/request_fields.h"
#include "engine/field_violation.h"
#include "engine/model/model_config.h"
#include "gtest/gtest.h"
#include "server/http/openai_request.h"
#include "server/request_from_proto.h"

namespace crossreg::server {
namespace {

struct Case {
  std::string name;
  std::string json_fields;  // added to {"prompt": [5, 7], ...}
  std::function<void(v1::GenerateRequest&)> set;
};

class FrontDoorsAgreeTest : public ::testing::Test {
 protected:
  FrontDoorsAgreeTest() {
    model_.vocab_size = 300;
    model_.max_position = 128;
    model_.draft_placeholder = 299;
    env_.model = &model_;
    env_.has_adapter = true;
    env_.placeholder_token = 299;
  }

  absl::Status Grpc(const Case& c) const {
    v1::GenerateRequest r;
    r.mutable_token_ids()->add_ids(5);
    r.mutable_token_ids()->add_ids(7);
    c.set(r);
    return RequestFromProto(r, env_, defaults_).status();
  }

  absl::Status Http(const Case& c) const {
    auto parsed = ParseOpenAiRequest(R"({"prompt": [5, 7], )" + c.json_fields + "}", OpenAiEndpoint::kCompletions);
    if (!parsed.ok()) return parsed.status();
    return InJsonTerms(RequestFromProto(parsed->proto, env_, defaults_).status(), OpenAiEndpoint::kCompletions);
  }

  ModelConfig model_;
  DecodingEnvironment env_;
  RequestDefaults defaults_;
};

TEST_F(FrontDoorsAgreeTest, TheSameBadRequestIsRefusedWithTheSameFieldAndWords) {
  using R = v1::GenerateRequest;
  const std::vector<Case> cases = {
      {"temperature", R"("temperature": -0.5)", [](R& r) { r.mutable_sampling()->set_temperature(-0.5f); }},
      {"top_p", R"("top_p": 1.5)", [](R& r) { r.mutable_sampling()->set_top_p(1.5f); }},
      {"min_p", R"("min_p": 2)", [](R& r) { r.mutable_sampling()->set_min_p(2); }},
      {"presence_penalty", R"("presence_penalty": 2.5)",
       [](R& r) { r.mutable_sampling()->set_presence_penalty(2.5f); }},
      {"frequency_penalty", R"("frequency_penalty": -3)",
       [](R& r) { r.mutable_sampling()->set_frequency_penalty(-3); }},
      {"repetition_penalty", R"("repetition_penalty": 0)",
       [](R& r) { r.mutable_sampling()->set_repetition_penalty(0); }},
      {"beta", R"("mode": "lossy", "beta": 1)",
       [](R& r) {
         r.mutable_decoding()->set_mode(v1::DECODING_MODE_LOSSY);
         r.mutable_decoding()->set_beta(1);
       }},
      {"tau", R"("mode": "lossy", "tau": 0.5)",
       [](R& r) {
         r.mutable_decoding()->set_mode(v1::DECODING_MODE_LOSSY);
         r.mutable_decoding()->set_tau(0.5f);
       }},
      {"gamma", R"("mode": "lossless", "gamma": 1000)",
       [](R& r) {
         r.mutable_decoding()->set_mode(v1::DECODING_MODE_LOSSLESS);
         r.mutable_decoding()->set_gamma(1000);
       }},
      {"fork_outcomes under ar", R"("mode": "ar", "fork_outcomes": 2)",
       [](R& r) {
         r.mutable_decoding()->set_mode(v1::DECODING_MODE_AR);
         r.mutable_decoding()->set_fork_outcomes(2);
       }},
      {"adaptive_gamma under ar", R"("mode": "ar", "adaptive_gamma": true)",
       [](R& r) {
         r.mutable_decoding()->set_mode(v1::DECODING_MODE_AR);
         r.mutable_decoding()->set_adaptive_gamma(true);
       }},
      {"beta outside lossy", R"("mode": "lossless", "beta": 0.5)",
       [](R& r) {
         r.mutable_decoding()->set_mode(v1::DECODING_MODE_LOSSLESS);
         r.mutable_decoding()->set_beta(0.5f);
       }},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const absl::Status grpc = Grpc(c);
    const absl::Status http = Http(c);
    ASSERT_FALSE(grpc.ok());
    ASSERT_FALSE(http.ok());
    EXPECT_EQ(grpc.code(), http.code());
    // The gRPC field, spelled as the JSON body spells it, is the HTTP field; the words
    // after it are the same.
    const absl::Status renamed = InJsonTerms(grpc, OpenAiEndpoint::kCompletions);
    ASSERT_TRUE(ViolatedField(grpc).has_value()) << grpc;
    EXPECT_EQ(ViolatedField(renamed), ViolatedField(http)) << grpc << " | " << http;
    EXPECT_EQ(renamed.message(), http.message());
  }
}

TEST(RequestFieldTableTest, RangesAreTheRulesAndEveryPathIsOnce) {
  // Inside and at the edges.
  EXPECT_TRUE(CheckFieldRange("sampling.top_p", 1).ok());
  EXPECT_FALSE(CheckFieldRange("sampling.top_p", 0).ok());
  EXPECT_TRUE(CheckFieldRange("decoding.beta", 0).ok());
  EXPECT_FALSE(CheckFieldRange("decoding.beta", 1).ok());
  EXPECT_TRUE(CheckFieldRange("decoding.tau", -1e9).ok());
  EXPECT_FALSE(CheckFieldRange("sampling.temperature", std::numeric_limits<double>::infinity()).ok());
  EXPECT_FALSE(CheckFieldRange("sampling.min_p", std::nan("")).ok());
  EXPECT_EQ(CheckFieldRange("sampling.top_p", 1.5).message(), "sampling.top_p: must be in (0, 1], got 1.5");
  EXPECT_EQ(CheckFieldRange("sampling.repetition_penalty", 0, "0.0").message(),
            "sampling.repetition_penalty: must be > 0 (1: off), got 0.0");
  EXPECT_EQ(CheckFieldRange("sampling.logit_bias", 500, {}, "[4]").message(),
            "sampling.logit_bias[4]: must be in [-100, 100], got 500");
  // A field without a range is a programming error, not a pass.
  EXPECT_EQ(CheckFieldRange("sampling.seed", 1).code(), absl::StatusCode::kInternal);
  std::vector<std::string> seen;
  for (const RequestField& f : RequestFields()) {
    EXPECT_EQ(std::count(seen.begin(), seen.end(), std::string(f.path)), 0) << f.path;
    seen.emplace_back(f.path);
    EXPECT_FALSE(f.completions.empty()) << f.path;
    EXPECT_FALSE(f.chat.empty()) << f.path;
  }
}

}  // namespace
}  // namespace crossreg::server
