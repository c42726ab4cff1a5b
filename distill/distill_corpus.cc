#include "distill/distill_corpus.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <system_error>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"

namespace crossreg {
namespace {

namespace fs = std::filesystem;

absl::Status CorpusError(const std::string& where, const std::string& problem) {
  return absl::InvalidArgumentError(absl::StrCat("--prompts: ", where, ": ", problem));
}

absl::StatusOr<std::string> ReadWholeFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return CorpusError(path, "cannot open");
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) return CorpusError(path, "read failed");
  return std::move(text).str();
}

// The document a JSONL line holds: its "text" string, else its "prompt" string.
absl::Status ReadJsonl(const std::string& path, std::vector<CorpusDocument>& out) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return CorpusError(path, "cannot open");
  std::string line;
  for (int64_t number = 1; std::getline(in, line); ++number) {
    const std::string where = absl::StrCat(path, ":", number);
    if (absl::StripAsciiWhitespace(line).empty()) continue;
    const nlohmann::json object = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (object.is_discarded()) return CorpusError(where, "not a JSON value");
    if (!object.is_object()) return CorpusError(where, "not a JSON object");
    const char* field = nullptr;
    for (const char* name : {"text", "prompt"}) {
      auto it = object.find(name);
      if (it != object.end() && it->is_string()) {
        field = name;
        break;
      }
    }
    if (field == nullptr) return CorpusError(where, "has neither a \"text\" nor a \"prompt\" string field");
    out.push_back({where, object[field].get<std::string>()});
  }
  if (in.bad()) return CorpusError(path, "read failed");
  return absl::OkStatus();
}

absl::Status ReadDirectory(const std::string& root, std::vector<CorpusDocument>& out) {
  std::vector<fs::path> files;
  std::error_code ec;
  fs::recursive_directory_iterator it(root, fs::directory_options::none, ec);
  for (; !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (absl::StartsWith(name, ".")) {
      if (it->is_directory(ec)) it.disable_recursion_pending();
      continue;
    }
    if (it->is_regular_file(ec)) files.push_back(it->path());
  }
  if (ec) return CorpusError(root, absl::StrCat("cannot list the directory: ", ec.message()));
  std::sort(files.begin(), files.end());
  for (const fs::path& file : files) {
    if (absl::EndsWith(file.string(), ".jsonl")) {  // as when named on its own
      if (absl::Status s = ReadJsonl(file.string(), out); !s.ok()) return s;
      continue;
    }
    auto text = ReadWholeFile(file.string());
    if (!text.ok()) return text.status();
    out.push_back({file.string(), *std::move(text)});
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::vector<CorpusDocument>> ReadCorpus(const std::vector<std::string>& sources) {
  std::vector<CorpusDocument> documents;
  for (const std::string& source : sources) {
    std::error_code ec;
    const fs::file_status status = fs::status(source, ec);
    if (ec || !fs::exists(status)) return CorpusError(source, "no such file or directory");
    if (fs::is_directory(status)) {
      if (absl::Status s = ReadDirectory(source, documents); !s.ok()) return s;
    } else if (absl::EndsWith(source, ".jsonl")) {
      if (absl::Status s = ReadJsonl(source, documents); !s.ok()) return s;
    } else {
      auto text = ReadWholeFile(source);
      if (!text.ok()) return text.status();
      documents.push_back({source, *std::move(text)});
    }
  }
  return documents;
}

}  // namespace crossreg
