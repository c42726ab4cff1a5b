// crossreg-loadgen: N concurrent Generate streams against crossreg-server, then
// throughput, latency, tokens-per-forward and prefix-cache hits per decoding mode.
//   crossreg-loadgen --concurrency 8 --requests 32 --mode ar,ngram --max_tokens 64
//   crossreg-loadgen --workload shared_prefix --prefix_tokens 768 --requests 64 --max_tokens 32
//   crossreg-loadgen --workload multi_turn --conversations 8 --turns 4 --max_tokens 32
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <iostream>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "clients/common/channel.h"
#include "clients/common/names.h"
#include "clients/common/program.h"
#include "clients/common/request_flags.h"
#include "clients/loadgen/concurrently.h"
#include "clients/loadgen/multi_turn.h"
#include "clients/loadgen/prompts.h"
#include "clients/loadgen/report.h"
#include "clients/loadgen/run_stream.h"
#include "clients/loadgen/shared_prefix.h"
#include "clients/loadgen/token_pool.h"

ABSL_FLAG(int, concurrency, 8, "Streams open at once (multi_turn: conversations under way at once)");
ABSL_FLAG(int, requests, 32, "Requests in all (prompts, shared_prefix; multi_turn ignores it)");
ABSL_FLAG(std::string, mode, "ar",
          "Decoding modes, comma-separated, cycled over requests (multi_turn: over conversations) "
          "(e.g. ar,lossless,ngram)");
ABSL_FLAG(std::string, prompts_file, "",
          "One prompt per line, cycled over requests; empty = built-in story prompts (--workload=prompts only)");
ABSL_FLAG(std::string, format, "text", "Report: text (a table) or json");
ABSL_FLAG(std::string, workload, "prompts",
          "prompts (text prompts), shared_prefix (one prefix + a suffix per request) or multi_turn "
          "(conversations resending their history); see --help");
ABSL_FLAG(int, prefix_tokens, 768,
          "shared_prefix: token ids of the prefix every request shares; multi_turn: of each conversation's opening");
ABSL_FLAG(int, suffix_tokens, 32,
          "shared_prefix: token ids of each request's own suffix; multi_turn: of each later turn's user message");
ABSL_FLAG(int, conversations, 8, "multi_turn: conversations");
ABSL_FLAG(int, turns, 4, "multi_turn: turns per conversation");
ABSL_FLAG(uint64_t, setup_seed, 1,
          "shared_prefix, multi_turn: seed of the setup call that writes the text the prompts are cut from; "
          "another seed, other prompts (a cold prefix cache on a server that ran the last seed's)");

namespace crossreg::clients {
namespace {

enum class Workload { kPrompts, kSharedPrefix, kMultiTurn };

int UsageError(const std::string& message) {
  std::cerr << "crossreg-loadgen: " << message << "\n";
  return 2;
}

int Failure(const std::string& message) {
  std::cerr << "crossreg-loadgen: " << message << "\n";
  return 1;
}

int Main() {
  const std::string format = absl::GetFlag(FLAGS_format);
  if (format != "text" && format != "json") return UsageError("--format must be text or json, got '" + format + "'");
  const std::string workload_name = absl::GetFlag(FLAGS_workload);
  Workload workload;
  if (workload_name == "prompts") {
    workload = Workload::kPrompts;
  } else if (workload_name == "shared_prefix") {
    workload = Workload::kSharedPrefix;
  } else if (workload_name == "multi_turn") {
    workload = Workload::kMultiTurn;
  } else {
    return UsageError("--workload must be prompts, shared_prefix or multi_turn, got '" + workload_name + "'");
  }
  const int concurrency = absl::GetFlag(FLAGS_concurrency);
  const int requests = absl::GetFlag(FLAGS_requests);
  if (concurrency < 1) return UsageError("--concurrency must be >= 1");
  if (requests < 1 && workload != Workload::kMultiTurn) return UsageError("--requests must be >= 1");

  std::vector<crossreg::v1::DecodingMode> modes;
  for (absl::string_view name : absl::StrSplit(absl::GetFlag(FLAGS_mode), ',', absl::SkipWhitespace())) {
    auto mode = ParseDecodingMode(std::string(name));
    if (!mode.ok()) return UsageError("--" + std::string(mode.status().message()));
    modes.push_back(*mode);
  }
  if (modes.empty()) return UsageError("--mode lists no mode");

  const crossreg::v1::GenerateRequest base = RequestTemplateFromFlags();
  std::vector<std::string> prompts;
  const SharedPrefixShape shared{absl::GetFlag(FLAGS_prefix_tokens), absl::GetFlag(FLAGS_suffix_tokens), requests};
  const MultiTurnShape multi{absl::GetFlag(FLAGS_prefix_tokens), absl::GetFlag(FLAGS_suffix_tokens),
                             absl::GetFlag(FLAGS_conversations), absl::GetFlag(FLAGS_turns)};
  if (workload == Workload::kPrompts) {
    prompts = BuiltinPrompts();
    if (!absl::GetFlag(FLAGS_prompts_file).empty()) {
      auto loaded = LoadPromptsFile(absl::GetFlag(FLAGS_prompts_file));
      if (!loaded.ok()) return UsageError(std::string(loaded.status().message()));
      prompts = std::move(*loaded);
    }
  } else {
    if (!absl::GetFlag(FLAGS_prompts_file).empty()) return UsageError("--prompts_file is for --workload=prompts only");
    if (shared.prefix_tokens < 1) return UsageError("--prefix_tokens must be >= 1");
    if (shared.suffix_tokens < 1) return UsageError("--suffix_tokens must be >= 1");
    // The prompts' lengths must fit the context with the output, so it must be known.
    if (base.sampling().max_tokens() < 1) {
      return UsageError("--workload=" + workload_name +
                        " needs --max_tokens >= 1 (to check the prompts fit the context)");
    }
    if (workload == Workload::kMultiTurn) {
      if (multi.conversations < 1) return UsageError("--conversations must be >= 1");
      if (multi.turns < 1) return UsageError("--turns must be >= 1");
    }
  }

  auto channel = ConnectFromFlags();
  if (!channel.ok()) return Failure(std::string(channel.status().message()));
  auto stub = crossreg::v1::Generation::NewStub(*channel);
  // The ids carry the pid so that two load generators on one server never collide.
  const std::string id_prefix = absl::StrFormat("loadgen-%d-", static_cast<int>(getpid()));

  // The token workloads' prompts come from a setup call, before the clock starts.
  std::vector<std::vector<int32_t>> token_prompts;
  std::vector<Conversation> conversations;
  size_t pool_tokens = 0;
  double setup_s = 0;
  if (workload != Workload::kPrompts) {
    const auto setup_start = std::chrono::steady_clock::now();
    auto info = FetchModelInfo(*stub);
    if (!info.ok()) return Failure(std::string(info.status().message()));
    const int max_tokens = base.sampling().max_tokens();
    const absl::Status fits = workload == Workload::kSharedPrefix
                                  ? CheckSharedPrefixFits(shared, max_tokens, info->context_length())
                                  : CheckMultiTurnFits(multi, max_tokens, info->context_length());
    if (!fits.ok()) return UsageError(std::string(fits.message()));
    const int wanted =
        workload == Workload::kSharedPrefix ? SharedPrefixPoolTokens(shared) : MultiTurnPoolTokens(multi);
    auto pool = FetchTokenPool(*stub, *info, wanted, absl::GetFlag(FLAGS_setup_seed), id_prefix + "setup");
    if (!pool.ok()) return Failure(std::string(pool.status().message()));
    pool_tokens = pool->size();
    int shuffled = 0;
    if (workload == Workload::kSharedPrefix) {
      auto built = SharedPrefixPrompts(*pool, shared, &shuffled);
      if (!built.ok()) return Failure(std::string(built.status().message()));
      token_prompts = std::move(*built);
    } else {
      auto planned = PlanConversations(*pool, multi, &shuffled);
      if (!planned.ok()) return Failure(std::string(planned.status().message()));
      conversations = std::move(*planned);
    }
    // Shuffled ids are not text: drafting on them tells little. Say so, but run.
    if (shuffled > 0) {
      std::cerr << absl::StrFormat(
          "crossreg-loadgen: note: the setup text (%zu token ids) holds too few different windows: %d of the %s "
          "are shuffled ids, not text (fewer or shorter ones avoid it)\n",
          pool_tokens, shuffled, workload == Workload::kSharedPrefix ? "suffixes" : "openings or messages");
    }
    setup_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - setup_start).count();
  }

  // Request i: mode i mod |modes|, its prompt (text i mod |prompts|, or token prompt i),
  // seed --seed + i (distinct samples when --temperature > 0, yet the whole run is
  // reproducible).
  auto make_request = [&](int i) {
    crossreg::v1::GenerateRequest r = base;
    r.set_request_id(id_prefix + std::to_string(i));
    if (workload == Workload::kPrompts) {
      r.set_text(prompts[static_cast<size_t>(i) % prompts.size()]);
    } else {
      const auto& ids = token_prompts[static_cast<size_t>(i)];
      *r.mutable_token_ids()->mutable_ids() = google::protobuf::RepeatedField<int32_t>(ids.begin(), ids.end());
    }
    r.mutable_decoding()->set_mode(modes[static_cast<size_t>(i) % modes.size()]);
    r.mutable_sampling()->set_seed(base.sampling().seed() + static_cast<uint64_t>(i));
    return r;
  };

  std::vector<StreamResult> results;
  const auto start = std::chrono::steady_clock::now();
  if (workload == Workload::kMultiTurn) {
    results = RunConversations(*stub, base, conversations, modes, concurrency, id_prefix);
  } else {
    results.resize(static_cast<size_t>(requests));
    ForEachConcurrently(requests, concurrency,
                        [&](int i) { results[static_cast<size_t>(i)] = RunStream(*stub, make_request(i)); });
  }
  const double wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

  const int sent = static_cast<int>(results.size());
  const LoadReport report = Summarize(results, wall_s);
  if (format == "json") {
    nlohmann::json out = ReportToJson(report);
    out["config"] = {{"server", ServerAddressFromFlags()},
                     {"workload", workload_name},
                     {"concurrency", concurrency},
                     {"requests", sent},
                     {"modes", absl::GetFlag(FLAGS_mode)},
                     {"max_tokens", base.sampling().max_tokens()},
                     {"gamma", base.decoding().gamma()},
                     {"temperature", base.sampling().temperature()},
                     // Distinct prompts: the text prompts cycled, or one per token request.
                     {"prompts", workload == Workload::kPrompts ? prompts.size() : results.size()}};
    if (workload != Workload::kPrompts) {
      out["config"]["prefix_tokens"] = shared.prefix_tokens;
      out["config"]["suffix_tokens"] = shared.suffix_tokens;
      out["config"]["setup_seed"] = absl::GetFlag(FLAGS_setup_seed);
      out["config"]["pool_tokens"] = pool_tokens;
      out["config"]["setup_s"] = setup_s;
    }
    if (workload == Workload::kMultiTurn) {
      out["config"]["conversations"] = multi.conversations;
      out["config"]["turns"] = multi.turns;
    }
    std::cout << out.dump(2) << "\n";
  } else {
    std::string header;
    switch (workload) {
      case Workload::kPrompts:
        header = absl::StrFormat("%d requests, concurrency %d, modes %s, %zu prompts", sent, concurrency,
                                 absl::GetFlag(FLAGS_mode), prompts.size());
        break;
      case Workload::kSharedPrefix:
        header =
            absl::StrFormat("shared_prefix, %d requests of %d shared + %d own token ids, concurrency %d, modes %s",
                            sent, shared.prefix_tokens, shared.suffix_tokens, concurrency, absl::GetFlag(FLAGS_mode));
        break;
      case Workload::kMultiTurn:
        header = absl::StrFormat(
            "multi_turn, %d conversations x %d turns (opening %d, messages %d token ids), concurrency %d, modes %s",
            multi.conversations, multi.turns, multi.opening_tokens, multi.message_tokens, concurrency,
            absl::GetFlag(FLAGS_mode));
        break;
    }
    std::cout << "crossreg-loadgen: " << header << absl::StrFormat(": %.2f s", wall_s);
    if (workload != Workload::kPrompts) {
      std::cout << absl::StrFormat(" (setup %.2f s, %zu token ids, not counted)", setup_s, pool_tokens);
    }
    std::cout << "\n" << FormatReportText(report);
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
      "TTFT, inter-token latency, tokens per forward and prefix-cache hits.\n"
      "  crossreg-loadgen [--server host:port] --concurrency 8 --requests 32 --mode ar,ngram --max_tokens 64\n"
      "Workloads (--workload):\n"
      "  prompts        (default) text prompts: the built-in story openings or --prompts_file, cycled.\n"
      "  shared_prefix  --requests prompts of token ids: one prefix of --prefix_tokens ids that\n"
      "                 all share, then --suffix_tokens ids of each request's own (different from\n"
      "                 the first id on), so a prefix cache can serve every prefix but the first.\n"
      "    crossreg-loadgen --workload shared_prefix --prefix_tokens 768 --suffix_tokens 32 \\\n"
      "                     --concurrency 8 --requests 64 --max_tokens 32\n"
      "  multi_turn     --conversations conversations of --turns turns, at most --concurrency\n"
      "                 under way at once, turns of one in order (--requests is ignored). Turn 1\n"
      "                 sends an opening of --prefix_tokens ids (each conversation its own); turn\n"
      "                 k+1 sends turn k's prompt + its output + a user message of --suffix_tokens\n"
      "                 ids. Conversation c uses the c-th mode of --mode (cycled).\n"
      "    crossreg-loadgen --workload multi_turn --conversations 8 --turns 4 --prefix_tokens 768 \\\n"
      "                     --suffix_tokens 32 --concurrency 4 --max_tokens 32\n"
      "  The token workloads need --max_tokens (the prompts and output must fit the model's\n"
      "  context, which they check), and take their ids from a story the server's model writes\n"
      "  in one setup call (sampled with --setup_seed; not timed, not in the report), so that\n"
      "  drafting sees real text.\n"
      "  The ids depend only on the model and --setup_seed, and both workloads cut them from\n"
      "  the same text: a run finds the blocks of earlier runs on the same server cached.\n"
      "  For a cold cache, restart the server or give each run its own --setup_seed.\n"
      "The cache table: prompt tokens, those the server served from its prefix cache\n"
      "(Usage.cached_prompt_tokens) and hit = cached/prompt; multi_turn adds reusable = the\n"
      "previous turn's prompt + output (turns >= 2), reused = their cached tokens, reuse =\n"
      "reused/reusable, and a row per turn.\n"
      "Inter-token latency is per token: a chunk of n tokens arriving dt after the previous\n"
      "chunk counts n samples of dt/n. Rates are over the whole run's wall time, also per mode.\n"
      "Exit status: 0 all requests succeeded, 1 some failed or no connection, 2 bad flags.\n"
      "Flags may be written with dashes or underscores (--max-tokens).");
  return crossreg::clients::Main();
}
