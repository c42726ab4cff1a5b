#include "tests/integration/random_adapter_server.h"

#include <unistd.h>

#include <filesystem>
#include <system_error>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "engine/model/lora_adapter.h"
#include "engine/model/model_loader.h"
#include "engine/model/peft_writer.h"
#include "tests/testing/test_paths.h"

namespace crossreg::testing {

absl::StatusOr<std::unique_ptr<RandomAdapterServer>> RandomAdapterServer::Start(
    const std::string& name, uint64_t seed, const std::vector<std::string>& extra_flags) {
  return Start(name, seed, Stories260KGguf(), extra_flags);
}

absl::StatusOr<std::unique_ptr<RandomAdapterServer>> RandomAdapterServer::Start(const std::string& name, uint64_t seed,
                                                                                 const std::string& model_path,
                                                                                 std::vector<std::string> extra_flags) {
  auto model = LoadModel(model_path);
  if (!model.ok()) return model.status();
  std::unique_ptr<RandomAdapterServer> s(new RandomAdapterServer());
  s->adapter_dir_ = std::filesystem::temp_directory_path() / absl::StrCat("crossreg_", name, "_adapter_", getpid());
  std::error_code ec;
  std::filesystem::create_directories(s->adapter_dir_, ec);
  if (ec) return absl::InternalError(absl::StrCat("cannot create ", s->adapter_dir_, ": ", ec.message()));
  RandomLoraOptions options;
  options.rank = 4;
  options.magnitude = 0.5f;
  options.seed = seed;
  auto adapter = MakeRandomLoraAdapter((*model)->config, options);
  if (absl::Status written = WritePeftAdapter(*adapter, (*model)->config, s->adapter_dir_); !written.ok()) {
    return written;
  }
  // Fixed γ unless a suite asks otherwise: a random adapter's drafts almost never pay, so
  // the server's default adaptive draft length would run them as AR, and these suites
  // check the drafting and verification machinery itself.
  extra_flags.insert(extra_flags.begin(), {"--adapter=" + s->adapter_dir_, "--max_gamma=16", "--adaptive_gamma=false"});
  s->server_ = std::make_unique<ServerProcess>(std::move(extra_flags), model_path);
  if (!s->server_->Start()) return absl::InternalError(absl::StrCat("the server did not start:\n", s->server_->Log()));
  return s;
}

RandomAdapterServer::~RandomAdapterServer() {
  server_.reset();
  std::error_code ec;
  std::filesystem::remove_all(adapter_dir_, ec);
}

}  // namespace crossreg::testing
