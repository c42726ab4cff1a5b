// crossreg-loadgen: N concurrent Generate streams against crossreg-server, then
// throughput, latency and tokens-per-forward per decoding mode.
//   crossreg-loadgen --concurrency 8 --requests 32 --mode ar,ngram --max_tokens 64
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <iostream>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "clients/common/channel.h"
#include "clients/common/names.h"
#include "clients/common/program.h"
#include "clients/common/request_flags.h"
#include "clients/loadgen/prompts.h"
#include "clients/loadgen/report.h"
#include "clients/loadgen/run_stream.h"

ABSL_FLAG(int, concurrency, 8, "Streams open at once");
ABSL_FLAG(int, requests, 32, "Requests in all");
ABSL_FLAG(std::string, mode, "ar", "Decoding modes, comma-separated, cycled over requests (e.g. ar,lossless,ngram)");
ABSL_FLAG(std::string, prompts_file, "", "One prompt per line, cycled over requests; empty = built-in story prompts");
ABSL_FLAG(std::string, format, "text", "Report: text (a table) or json");

namespace crossreg::clients {
namespace {

int UsageError(const std::string& message) {
  std::cerr << "crossreg-loadgen: " << message << "\n";
  return 2;
}

int Main() {
  const std::string format = absl::GetFlag(FLAGS_format);
  if (format != "text" && format != "json") return UsageError("--format must be text or json, got '" + format + "'");
  const int concurrency = absl::GetFlag(FLAGS_concurrency);
  const int requests = absl::GetFlag(FLAGS_requests);
  if (concurrency < 1) return UsageError("--concurrency must be >= 1");
  if (requests < 1) return UsageError("--requests must be >= 1");

  std::vector<crossreg::v1::DecodingMode> modes;
  for (absl::string_view name : absl::StrSplit(absl::GetFlag(FLAGS_mode), ',', absl::SkipWhitespace())) {
    auto mode = ParseDecodingMode(std::string(name));
    if (!mode.ok()) return UsageError("--" + std::string(mode.status().message()));
    modes.push_back(*mode);
  }
  if (modes.empty()) return UsageError("--mode lists no mode");

  std::vector<std::string> prompts = BuiltinPrompts();
  if (!absl::GetFlag(FLAGS_prompts_file).empty()) {
    auto loaded = LoadPromptsFile(absl::GetFlag(FLAGS_prompts_file));
    if (!loaded.ok()) return UsageError(std::string(loaded.status().message()));
    prompts = std::move(*loaded);
  }

  auto channel = ConnectFromFlags();
  if (!channel.ok()) {
    std::cerr << "crossreg-loadgen: " << channel.status().message() << "\n";
    return 1;
  }
  auto stub = crossreg::v1::Generation::NewStub(*channel);

  // Request i: mode i mod |modes|, prompt i mod |prompts|, seed --seed + i (distinct
  // samples when --temperature > 0, yet the whole run is reproducible). The ids carry
  // the pid so that two load generators on one server never collide.
  const crossreg::v1::GenerateRequest base = RequestTemplateFromFlags();
  const std::string id_prefix = absl::StrFormat("loadgen-%d-", static_cast<int>(getpid()));
  auto make_request = [&](int i) {
    crossreg::v1::GenerateRequest r = base;
    r.set_request_id(id_prefix + std::to_string(i));
    r.set_text(prompts[static_cast<size_t>(i) % prompts.size()]);
    r.mutable_decoding()->set_mode(modes[static_cast<size_t>(i) % modes.size()]);
    r.mutable_sampling()->set_seed(base.sampling().seed() + static_cast<uint64_t>(i));
    return r;
  };

  // A thread per open stream: simple, and at tens of streams the threads cost nothing
  // next to the server's work. Each takes the next request index until none is left.
  std::vector<StreamResult> results(static_cast<size_t>(requests));
  std::atomic<int> next{0};
  const auto start = std::chrono::steady_clock::now();
  std::vector<std::thread> workers;
  for (int w = 0; w < std::min(concurrency, requests); ++w) {
    workers.emplace_back([&] {
      for (int i = next.fetch_add(1); i < requests; i = next.fetch_add(1)) {
        results[static_cast<size_t>(i)] = RunStream(*stub, make_request(i));
      }
    });
  }
  for (auto& t : workers) t.join();
  const double wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

  const LoadReport report = Summarize(results, wall_s);
  if (format == "json") {
    nlohmann::json out = ReportToJson(report);
    out["config"] = {{"server", ServerAddressFromFlags()},
                     {"concurrency", concurrency},
                     {"requests", requests},
                     {"modes", absl::GetFlag(FLAGS_mode)},
                     {"max_tokens", base.sampling().max_tokens()},
                     {"gamma", base.decoding().gamma()},
                     {"temperature", base.sampling().temperature()},
                     {"prompts", prompts.size()}};
    std::cout << out.dump(2) << "\n";
  } else {
    std::cout << absl::StrFormat("crossreg-loadgen: %d requests, concurrency %d, modes %s, %zu prompts: %.2f s\n",
                                 requests, concurrency, absl::GetFlag(FLAGS_mode), prompts.size(), wall_s)
              << FormatReportText(report);
  }
  // Non-zero when any request failed, so scripts notice.
  return report.overall.ok == report.overall.requests ? 0 : 1;
}

}  // namespace
}  // namespace crossreg::clients

int main(int argc, char** argv) {
  crossreg::clients::ParseClientCommandLine(
      argc, argv,
      "Load-test crossreg-server: N concurrent Generate streams, then per-mode throughput,\n"
      "TTFT, inter-token latency and tokens per forward.\n"
      "  crossreg-loadgen [--server host:port] --concurrency 8 --requests 32 --mode ar,ngram --max_tokens 64\n"
      "Inter-token latency is per token: a chunk of n tokens arriving dt after the previous\n"
      "chunk counts n samples of dt/n. Rates are over the whole run's wall time, also per mode.\n"
      "Exit status: 0 all requests succeeded, 1 some failed or no connection, 2 bad flags.\n"
      "Flags may be written with dashes or underscores (--max-tokens).");
  return crossreg::clients::Main();
}
