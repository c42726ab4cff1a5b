// The server's security pieces on their own: token files, bearer authentication,
// peer addresses, per-client stream slots, request ids, and the request parser's
// errors (UTF-8, malformed bytes, field sizes on the wire).
#include <regex>
#include <set>

#include "crossreg/v1/generation.pb.h"
#include "engine/field_violation.h"
#include "gtest/gtest.h"
#include "server/request_from_proto.h"
#include "server/request_parsing.h"
#include "server/security/call_principal.h"
#include "server/security/client_stream_limiter.h"
#include "server/security/request_id.h"
#include "server/security/token_authenticator.h"
#include "server/security/token_file.h"

namespace crossreg::server {
namespace {

TEST(TokenFileTest, NamedAndUnnamedTokensWithCommentsAndBlankLines) {
  auto tokens = ParseTokenFile("# clients\n\nalice:aaaaaaaaaaaaaaaa1\n  bbbbbbbbbbbbbbbb2  \nci-bot.1 : c:cccccccccccccccc\n",
                               "tokens.txt");
  ASSERT_TRUE(tokens.ok()) << tokens.status();
  ASSERT_EQ(tokens->size(), 3u);
  EXPECT_EQ((*tokens)[0].name, "alice");
  EXPECT_EQ((*tokens)[0].token, "aaaaaaaaaaaaaaaa1");
  EXPECT_EQ((*tokens)[1].name, "token4");  // unnamed: its line number
  EXPECT_EQ((*tokens)[1].token, "bbbbbbbbbbbbbbbb2");
  EXPECT_EQ((*tokens)[2].name, "ci-bot.1");
  EXPECT_EQ((*tokens)[2].token, "c:cccccccccccccccc");  // ':' after the name belongs to the token
}

TEST(TokenFileTest, EachBadLineIsNamed) {
  const std::pair<const char*, const char*> cases[] = {
      {"alice:short", "line 1: token shorter than 16"},
      {"x\nalice:aaaaaaaaaaaaaaaa\n", "line 1: token shorter than 16"},
      {"al ice:aaaaaaaaaaaaaaaa", "line 1: a name may contain only"},
      {":aaaaaaaaaaaaaaaa", "line 1: empty name"},
      {"alice:aaaaaaaa aaaaaaaaa", "line 1: a token may contain only printable ASCII"},
      {"alice:aaaaaaaaaaaaaaaa\nalice:bbbbbbbbbbbbbbbb", "line 2: duplicate name \"alice\""},
      {"alice:aaaaaaaaaaaaaaaa\nbob:aaaaaaaaaaaaaaaa", "line 2: duplicate token"},
      {"# nothing\n\n", "no tokens"},
  };
  for (const auto& [text, expected] : cases) {
    auto tokens = ParseTokenFile(text, "t.txt");
    ASSERT_FALSE(tokens.ok()) << text;
    EXPECT_NE(tokens.status().message().find(expected), std::string::npos) << tokens.status();
    EXPECT_EQ(tokens.status().message().find("aaaaaaaa aaaaaaaaa"), std::string::npos) << "echoes a token";
  }
  EXPECT_EQ(LoadTokenFile("/no/such/file").status().code(), absl::StatusCode::kNotFound);
}

TEST(TokenAuthenticatorTest, AcceptsOnlyConfiguredBearerTokens) {
  TokenAuthenticator off;
  EXPECT_FALSE(off.enabled());
  EXPECT_TRUE(off.Authenticate("").ok());
  TokenAuthenticator on({{"alice", "aaaaaaaaaaaaaaaa1"}, {"bob", "bbbbbbbbbbbbbbbb2"}});
  EXPECT_EQ(*on.Authenticate("Bearer aaaaaaaaaaaaaaaa1"), "alice");
  EXPECT_EQ(*on.Authenticate("bearer bbbbbbbbbbbbbbbb2"), "bob");
  EXPECT_EQ(*on.Authenticate("BEARER  bbbbbbbbbbbbbbbb2 "), "bob");
  for (const char* bad : {"", "Bearer", "Bearer ", "Basic aaaaaaaaaaaaaaaa1", "aaaaaaaaaaaaaaaa1",
                          "Bearer aaaaaaaaaaaaaaaa", "Bearer aaaaaaaaaaaaaaaa12", "Bearer bbbbbbbbbbbbbbbb1"}) {
    auto r = on.Authenticate(bad);
    EXPECT_EQ(r.status().code(), absl::StatusCode::kUnauthenticated) << bad;
  }
}

TEST(CallPrincipalTest, PeerHostDropsThePort) {
  EXPECT_EQ(PeerHost("ipv4:10.0.0.7:5123"), "10.0.0.7");
  EXPECT_EQ(PeerHost("ipv6:[::1]:5123"), "::1");
  EXPECT_EQ(PeerHost("ipv6:%5B::1%5D:5123"), "::1");
  EXPECT_EQ(PeerHost("ipv6:[fe80::1%25eth0]:80"), "fe80::1%25eth0");
  EXPECT_EQ(PeerHost("unix:/tmp/sock"), "unix:/tmp/sock");
}

TEST(ClientStreamLimiterTest, SlotsArePerPrincipalAndComeBack) {
  ClientStreamLimiter limiter(2);
  auto a1 = limiter.Acquire("alice");
  auto a2 = limiter.Acquire("alice");
  ASSERT_TRUE(a1.ok() && a2.ok());
  auto a3 = limiter.Acquire("alice");
  EXPECT_EQ(a3.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(a3.status().message().find("--max_streams_per_client 2"), std::string::npos) << a3.status();
  EXPECT_TRUE(limiter.Acquire("bob").ok());
  EXPECT_EQ(limiter.open_streams("alice"), 2);
  a1->reset();
  EXPECT_EQ(limiter.open_streams("alice"), 1);
  EXPECT_TRUE(limiter.Acquire("alice").ok());
  ClientStreamLimiter unlimited(0);
  std::vector<std::unique_ptr<ClientStreamLimiter::Lease>> many;
  for (int i = 0; i < 1000; ++i) many.push_back(std::move(*unlimited.Acquire("x")));
  EXPECT_EQ(unlimited.open_streams("x"), 1000);
}

TEST(RequestIdTest, ThirtyTwoHexDigitsNeverRepeating) {
  std::set<std::string> ids;
  for (int i = 0; i < 1000; ++i) {
    const std::string id = RandomRequestId();
    ASSERT_TRUE(std::regex_match(id, std::regex("[0-9a-f]{32}"))) << id;
    ids.insert(id);
  }
  EXPECT_EQ(ids.size(), 1000u);
}

std::string RequestBytes(const std::string& text, const std::string& stop) {
  v1::GenerateRequest request;
  request.set_request_id("id-1");
  request.set_text(text);
  request.mutable_sampling()->add_stop(stop);
  request.mutable_sampling()->set_max_tokens(4);
  return request.SerializeAsString();
}

grpc::ByteBuffer Buffer(const std::string& bytes) {
  grpc::Slice slice(bytes);
  return grpc::ByteBuffer(&slice, 1);
}

TEST(RequestParsingTest, InvalidUtf8IsNamedByTheFieldsApiPath) {
  v1::GenerateRequest parsed;
  ASSERT_TRUE(ParseRequest(RequestBytes("hello", "stop"), parsed).ok());
  EXPECT_EQ(parsed.text(), "hello");
  std::string bad_text = RequestBytes("hel\xfflo", "stop");
  auto s = ParseRequest(Buffer(bad_text), parsed);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message().rfind("prompt.text: not valid UTF-8", 0), 0u) << s;
  s = ParseRequest(RequestBytes("hello", "st\xc0p"), parsed);
  EXPECT_EQ(s.message().rfind("sampling.stop: not valid UTF-8", 0), 0u) << s;
  EXPECT_EQ(ViolatedField(s), "sampling.stop");  // the field as data, not only in the text
  s = ParseRequest(RequestBytes("a\xed\xa0\x80", "stop"), parsed);  // a UTF-16 surrogate
  EXPECT_EQ(ViolatedField(s), "prompt.text") << s;
  s = ParseRequest(RequestBytes("a\xc0\xaf", "stop"), parsed);  // an overlong '/'
  EXPECT_EQ(ViolatedField(s), "prompt.text") << s;
  ASSERT_TRUE(ParseRequest(RequestBytes("h\xc3\xa9llo \xf0\x9f\x99\x82", "\xe2\x82\xac"), parsed).ok());
  v1::AbortRequest abort;
  std::string abort_bytes = "\x0a\x02\xff\xfe";  // request_id = "\xff\xfe"
  s = ParseRequest(abort_bytes, abort);
  EXPECT_EQ(s.message().rfind("request_id: not valid UTF-8", 0), 0u) << s;
  s = ParseRequest(std::string("\x12\x7f" "abc", 5), parsed);  // text claims 127 bytes, has 3
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("not a valid crossreg.v1.GenerateRequest"), std::string::npos) << s;
}

TEST(RequestParsingTest, TopLevelFieldBytesReadsSizesWithoutParsing) {
  const std::string text(100000, 'x');
  const grpc::ByteBuffer buffer = Buffer(RequestBytes(text, "stop"));
  EXPECT_EQ(*TopLevelFieldBytes(buffer, v1::GenerateRequest::kTextFieldNumber), text.size());
  EXPECT_EQ(*TopLevelFieldBytes(buffer, v1::GenerateRequest::kRequestIdFieldNumber), 4u);
  EXPECT_EQ(*TopLevelFieldBytes(buffer, 99), 0u);
  // Split across many slices, as gRPC delivers big messages.
  const std::string bytes = RequestBytes(text, "stop");
  std::vector<grpc::Slice> slices;
  for (size_t at = 0; at < bytes.size(); at += 1000) slices.emplace_back(bytes.substr(at, 1000));
  grpc::ByteBuffer split(slices.data(), slices.size());
  EXPECT_EQ(*TopLevelFieldBytes(split, v1::GenerateRequest::kTextFieldNumber), text.size());
  EXPECT_EQ(TopLevelFieldBytes(Buffer(bytes.substr(0, 500)), 2).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(TopLevelFieldBytes(Buffer("\x0b\x00"), 2).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace crossreg::server
