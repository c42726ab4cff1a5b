// crossreg-server's --backend flag on the real binary: `cuda` serves on the GPU when
// one is visible and is otherwise refused at start-up with "no CUDA device is
// available"; `auto` picks CUDA when it can and serves on the CPU when it cannot, and
// GetModelInfo and the ready line say which. Built in the CPU tree and in the CUDA
// tree (scripts/test.sh runs it there too), so both builds are checked.
#include <string>

#include "engine/runtime/open_engine.h"
#include "gtest/gtest.h"
#include "tests/integration/generation_client.h"
#include "tests/integration/server_process.h"
#include "tests/testing/test_paths.h"

namespace crossreg::testing {
namespace {

std::string ExpectedAutoBackend() { return CudaDeviceVisible() ? "cuda" : "cpu"; }

v1::ModelInfo GetInfo(ServerProcess& server) {
  v1::ModelInfo info;
  grpc::ClientContext context;
  EXPECT_TRUE(server.NewStub()->GetModelInfo(&context, v1::GetModelInfoRequest(), &info).ok());
  return info;
}

TEST(BackendSelectionTest, CudaServesOnTheGpuOrIsRefusedWithoutADevice) {
  ServerProcess server({"--backend=cuda"});
  if (!CudaDeviceVisible()) {
    EXPECT_FALSE(server.Start(20)) << server.Log();
    EXPECT_NE(server.Terminate(10), 0);
    EXPECT_NE(server.Log().find("no CUDA device is available"), std::string::npos) << server.Log();
    if (!CudaBackendBuilt()) {
      EXPECT_NE(server.Log().find("-DCROSSREG_CUDA=ON"), std::string::npos) << server.Log();
    }
    return;
  }
  ASSERT_TRUE(server.Start(120)) << server.Log();
  EXPECT_EQ(GetInfo(server).backend(), "cuda");
  auto stub = server.NewStub();
  const StreamResult r = RunGenerate(*stub, GreedyRequest("Once upon a time", v1::DECODING_MODE_AR, 24));
  ASSERT_TRUE(r.status.ok()) << r.status.error_message();
  EXPECT_EQ(r.ids.size(), 24u);
  EXPECT_EQ(server.Terminate(), 0);
}

TEST(BackendSelectionTest, AutoServesOnWhatIsThereAndSaysWhich) {
  ServerProcess server({"--backend=auto"});
  ASSERT_TRUE(server.Start(120)) << server.Log();
  const v1::ModelInfo info = GetInfo(server);
  EXPECT_EQ(info.backend(), ExpectedAutoBackend());
  EXPECT_FALSE(info.backend_device().empty());
  EXPECT_NE(server.Log().find("backend " + ExpectedAutoBackend() + " ("), std::string::npos) << server.Log();
  // It serves, and greedy AR equals crossreg-generate's on the same (auto) backend.
  auto stub = server.NewStub();
  const StreamResult r = RunGenerate(*stub, GreedyRequest("Once upon a time", v1::DECODING_MODE_AR, 24));
  ASSERT_TRUE(r.status.ok()) << r.status.error_message();
  const CliResult cli = RunCli(Stories260KGguf(), "", "Once upon a time", "ar", 24);
  ASSERT_TRUE(cli.ok) << cli.error;
  EXPECT_EQ(r.ids, cli.ids);
  EXPECT_EQ(server.Terminate(), 0);
}

TEST(BackendSelectionTest, AnUnknownBackendIsAFlagError) {
  ServerProcess server({"--backend=tpu"});
  EXPECT_FALSE(server.Start(10));
  EXPECT_EQ(server.Terminate(10), 2);
  EXPECT_NE(server.Log().find("--backend must be cpu, cuda or auto, got 'tpu'"), std::string::npos) << server.Log();
}

}  // namespace
}  // namespace crossreg::testing
