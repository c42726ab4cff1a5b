// Where the seed writers (make_seeds.cc, make_request_seeds.cc) put their seeds:
// OUT_DIR/<target>/<name>, one file per seed.
#pragma once

#include <filesystem>
#include <string>
#include <system_error>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "tests/testing/gguf_writer.h"

namespace crossreg::fuzz {

class SeedWriter {
 public:
  explicit SeedWriter(std::string out) : out_(std::move(out)) {}

  absl::Status Add(const std::string& target, const std::string& name, const std::string& bytes) {
    const std::string dir = absl::StrCat(out_, "/", target);
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    if (ec) return absl::InternalError(absl::StrCat("cannot create ", dir, ": ", ec.message()));
    ++count_;
    return testing::WriteBytes(absl::StrCat(dir, "/", name), bytes);
  }
  int count() const { return count_; }

 private:
  std::string out_;
  int count_ = 0;
};

// make_request_seeds.cc (built when the fuzz tree has protobuf and gRPC): valid
// crossreg.v1.GenerateRequest messages for fuzz_request and OpenAI JSON bodies for
// fuzz_openai_request.
absl::Status WriteRequestSeeds(SeedWriter& seeds);

}  // namespace crossreg::fuzz
