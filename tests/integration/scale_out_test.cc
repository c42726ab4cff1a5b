// Scale-out as Kubernetes runs it: two replicas behind one client target. With
// pick_first a gRPC client pins one connection; with --lb round_robin over every
// address of the target (a headless Service's DNS answer, here two loopback
// addresses) the load generator spreads its calls over both replicas.
#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <thread>

#include "gtest/gtest.h"
#include "tests/integration/prometheus_text.h"
#include "tests/integration/server_process.h"
#include "tests/testing/test_paths.h"

namespace crossreg::testing {
namespace {

// Generate calls a replica finished, from its metrics.
double GenerateCalls(const ServerProcess& server, const std::string& host) {
  auto m = ScrapeMetrics(server.metrics_port(), host);
  EXPECT_TRUE(m.ok()) << m.status();
  if (!m.ok()) return -1;
  double calls = 0;
  for (const auto& [key, value] : *m) {
    if (key.rfind("crossreg_grpc_requests_total{", 0) == 0 && key.find("method=\"Generate\"") != std::string::npos) {
      calls += value;
    }
  }
  return calls;
}

// One call at a time: round_robin picks only among connected replicas, so calls
// started before the second connection is up all go to the first; with one in flight
// that is at most a call or two, not a whole window of concurrent ones.
int RunLoadgen(const std::string& target, const std::string& lb, int requests) {
  if (!std::filesystem::exists(BinDir() + "/crossreg-loadgen")) {
    ADD_FAILURE() << "crossreg-loadgen is not built in " << BinDir();
    return -1;
  }
  const std::string command = BinDir() + "/crossreg-loadgen --server '" + target + "' --lb " + lb +
                              " --requests " + std::to_string(requests) +
                              " --concurrency 1 --max_tokens 8 --format json > /dev/null 2>&1";
  const int status = std::system(command.c_str());
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

TEST(ScaleOutTest, RoundRobinSpreadsCallsOverTwoReplicas) {
  const int port = FreeLoopbackPort();
  ServerProcess a({}, "", nullptr, "127.0.0.1", port);
  ServerProcess b({}, "", nullptr, "127.0.0.2", port);
  ASSERT_TRUE(a.Start()) << a.Log();
  if (!b.Start()) GTEST_SKIP() << "cannot listen on 127.0.0.2 here: " << b.Log();
  const std::string target = "ipv4:127.0.0.1:" + std::to_string(port) + ",127.0.0.2:" + std::to_string(port);

  // round_robin sends calls only to connected replicas. A run of 32 short calls lasts
  // ~0.3 s, and on a loaded machine one replica's connection can take that long to come
  // up (seen once in CI: 0 / 32). So a run that finds only one replica connected is
  // repeated, up to three runs, each on a new channel; pick_first below never spreads.
  double on_a = 0, on_b = 0;
  for (int run = 1; run <= 3; ++run) {
    ASSERT_EQ(RunLoadgen(target, "round_robin", 32), 0);
    const double total_a = GenerateCalls(a, "127.0.0.1"), total_b = GenerateCalls(b, "127.0.0.2");
    const double run_a = total_a - on_a, run_b = total_b - on_b;
    on_a = total_a;
    on_b = total_b;
    std::printf("[ figures  ] round_robin run %d: 32 requests -> %.0f on replica A, %.0f on replica B\n", run, run_a,
                run_b);
    EXPECT_EQ(run_a + run_b, 32);
    if (run_a >= 32 * 0.4 && run_b >= 32 * 0.4) break;
    ASSERT_LT(run, 3) << "three round_robin runs in a row did not spread their calls over both replicas";
  }

  // pick_first, for contrast: one connection, one replica.
  ASSERT_EQ(RunLoadgen(target, "pick_first", 32), 0);
  const double first_a = GenerateCalls(a, "127.0.0.1") - on_a, first_b = GenerateCalls(b, "127.0.0.2") - on_b;
  std::printf("[ figures  ] pick_first: 32 requests -> %.0f on replica A, %.0f on replica B\n", first_a, first_b);
  EXPECT_EQ(first_a + first_b, 32);
  EXPECT_EQ(std::max(first_a, first_b), 32);
  EXPECT_EQ(a.Terminate(), 0);
  EXPECT_EQ(b.Terminate(), 0);
}

}  // namespace
}  // namespace crossreg::testing
