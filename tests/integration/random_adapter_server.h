// A crossreg-server on stories260K with a random rank-4 LoRA adapter (a PEFT directory
// under the temporary directory): every decoding mode runs, and its drafts are almost
// never accepted. Suites share one server per suite through RandomAdapterServerTest.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "gtest/gtest.h"
#include "tests/integration/server_process.h"

namespace crossreg::testing {

class RandomAdapterServer {
 public:
  // Writes the adapter drawn from `seed` to a directory named after `name` and starts
  // the server with it, --max_gamma=16, --adaptive_gamma=false (fixed γ: the drafts are
  // exercised, not judged) and `extra_flags`. The error carries the server's log.
  static absl::StatusOr<std::unique_ptr<RandomAdapterServer>> Start(const std::string& name, uint64_t seed,
                                                                    const std::vector<std::string>& extra_flags = {});
  // The same for another model (a .gguf or HF directory).
  static absl::StatusOr<std::unique_ptr<RandomAdapterServer>> Start(const std::string& name, uint64_t seed,
                                                                    const std::string& model,
                                                                    std::vector<std::string> extra_flags);
  ~RandomAdapterServer();  // removes the adapter directory (the server is killed if still running)

  ServerProcess& server() { return *server_; }
  const std::string& adapter_dir() const { return adapter_dir_; }

 private:
  RandomAdapterServer() = default;
  std::string adapter_dir_;
  std::unique_ptr<ServerProcess> server_;
};

// The fixture of a suite sharing one RandomAdapterServer: `Suite` (the derived class)
// names it with `static constexpr const char* kName` and draws its adapter from
// `static constexpr uint64_t kAdapterSeed`. The server must exit cleanly at the end.
template <typename Suite>
class RandomAdapterServerTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto started = RandomAdapterServer::Start(Suite::kName, Suite::kAdapterSeed);
    ASSERT_TRUE(started.ok()) << started.status();
    holder_ = started->release();
    server_ = &holder_->server();
  }
  static void TearDownTestSuite() {
    if (holder_ != nullptr) {
      EXPECT_EQ(server_->Terminate(), 0) << server_->Log();
    }
    delete holder_;
    holder_ = nullptr;
    server_ = nullptr;
  }
  // The adapter's PEFT directory (for a second server or the CLI on the same adapter).
  static const std::string& adapter_dir() { return holder_->adapter_dir(); }
  static inline RandomAdapterServer* holder_ = nullptr;
  static inline ServerProcess* server_ = nullptr;
};

}  // namespace crossreg::testing
