#include "distill/distill_data_file.h"

#include <bit>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <system_error>

#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"

namespace crossreg {
namespace {

static_assert(std::endian::native == std::endian::little, "the file is little-endian; this writer copies memory");

using Json = nlohmann::json;
constexpr int64_t kMagicBytes = 8;
constexpr int64_t kPreambleBytes = 16;                 // magic + uint64 H
constexpr uint64_t kMaxHeaderBytes = uint64_t{1} << 30;  // a sanity bound for readers

constexpr const char* kSplitNames[] = {"train", "eval"};

int64_t AlignUp8(int64_t n) { return (n + 7) / 8 * 8; }

// One array of the file, as the writer lays it out.
struct ArrayView {
  std::string name;   // "train.stream"
  const char* dtype;  // "int32" or "int64"
  int64_t element_bytes;
  int64_t count;
  const void* data;
};

std::vector<ArrayView> ArraysOf(const DistillData& data) {
  std::vector<ArrayView> arrays;
  for (const char* split_name : kSplitNames) {
    const DistillSplitData& s = std::string(split_name) == "train" ? data.train : data.eval;
    const std::string p = std::string(split_name) + ".";
    arrays.push_back({p + "stream", "int32", 4, static_cast<int64_t>(s.stream.size()), s.stream.data()});
    arrays.push_back({p + "start", "int64", 8, static_cast<int64_t>(s.start.size()), s.start.data()});
    arrays.push_back({p + "length", "int32", 4, static_cast<int64_t>(s.length.size()), s.length.data()});
    arrays.push_back(
        {p + "continuation", "int32", 4, static_cast<int64_t>(s.continuation.size()), s.continuation.data()});
  }
  return arrays;
}

// A split's arrays agree with each other and with the window.
absl::Status CheckSplit(const std::string& name, const DistillSplitData& s, int32_t window) {
  const int64_t n = s.examples();
  if (static_cast<int64_t>(s.length.size()) != n) {
    return absl::InvalidArgumentError(
        absl::StrCat(name, ": ", n, " prefix starts but ", s.length.size(), " prefix lengths"));
  }
  if (static_cast<int64_t>(s.continuation.size()) != n * window) {
    return absl::InvalidArgumentError(absl::StrCat(name, ": ", s.continuation.size(), " continuation tokens for ", n,
                                                   " examples of window ", window, " (want ", n * window, ")"));
  }
  const int64_t stream = static_cast<int64_t>(s.stream.size());
  for (int64_t i = 0; i < n; ++i) {
    if (s.start[i] < 0 || s.length[i] < 1 || s.start[i] > stream - s.length[i]) {
      return absl::InvalidArgumentError(absl::StrCat(name, ": example ", i, "'s prefix [", s.start[i], ", +",
                                                     s.length[i], ") lies outside the stream of ", stream,
                                                     " tokens"));
    }
  }
  if (s.documents < 0) return absl::InvalidArgumentError(absl::StrCat(name, ": negative document count"));
  return absl::OkStatus();
}

Json HeaderJson(const DistillData& data, const std::vector<ArrayView>& arrays, const std::vector<int64_t>& offsets) {
  const DistillDataHeader& h = data.header;
  Json j;
  j["format"] = kDistillDataFormat;
  j["version"] = kDistillDataVersion;
  j["model"] = h.model;
  j["vocab_size"] = h.vocab_size;
  j["bos_id"] = h.bos_id;
  j["eos_id"] = h.eos_id;
  j["window"] = h.window;
  j["windows_per_prefix"] = h.windows_per_prefix;
  j["prefix_min"] = h.prefix_min;
  j["prefix_max"] = h.prefix_max;
  j["seed"] = h.seed;
  j["holdout_pct"] = h.holdout_pct;
  j["temperature"] = h.temperature;
  j["sources"] = h.sources;
  j["backend"] = h.backend;
  j["seconds"] = h.seconds;
  for (const char* split_name : kSplitNames) {
    const DistillSplitData& s = std::string(split_name) == "train" ? data.train : data.eval;
    j["splits"][split_name] = {{"documents", s.documents},
                               {"stream_tokens", static_cast<int64_t>(s.stream.size())},
                               {"examples", s.examples()}};
  }
  for (size_t i = 0; i < arrays.size(); ++i) {
    j["arrays"][arrays[i].name] = {{"offset", offsets[i]}, {"dtype", arrays[i].dtype}, {"count", arrays[i].count}};
  }
  return j;
}

// The header text and the arrays' offsets: the arrays start at the first multiple of 8
// after the header, whose length depends on the offsets' digits, so iterate until the
// header fits before them (offsets only grow, so this ends).
std::string LayOut(const DistillData& data, const std::vector<ArrayView>& arrays, std::vector<int64_t>& offsets) {
  int64_t header_bytes = 0;
  for (;;) {
    int64_t at = AlignUp8(kPreambleBytes + header_bytes);
    offsets.clear();
    for (const ArrayView& a : arrays) {
      offsets.push_back(at);
      at = AlignUp8(at + a.count * a.element_bytes);
    }
    std::string text = HeaderJson(data, arrays, offsets).dump(-1, ' ', false, Json::error_handler_t::replace);
    if (kPreambleBytes + static_cast<int64_t>(text.size()) <= offsets.front()) return text;
    header_bytes = static_cast<int64_t>(text.size());
  }
}

absl::Status WriteError(const std::string& path, const std::string& what) {
  return absl::UnavailableError(absl::StrCat("cannot write ", path, ": ", what));
}

void WriteZeros(std::ofstream& out, int64_t n) {
  static const char kZeros[8] = {};
  out.write(kZeros, n);
}

// ---- reading ----

absl::Status FileError(const std::string& path, const std::string& what) {
  return absl::InvalidArgumentError(absl::StrCat(path, ": ", what));
}

template <typename T>
absl::Status ReadArray(std::ifstream& in, const std::string& path, int64_t file_bytes, int64_t header_end,
                       const Json& arrays, const std::string& name, const char* dtype, int64_t want_count,
                       std::vector<T>& out) {
  auto it = arrays.find(name);
  if (it == arrays.end() || !it->is_object()) return FileError(path, absl::StrCat("header: no array \"", name, "\""));
  const Json& a = *it;
  if (!a.contains("offset") || !a["offset"].is_number_integer() || !a.contains("count") ||
      !a["count"].is_number_integer() || !a.contains("dtype") || !a["dtype"].is_string()) {
    return FileError(path, absl::StrCat("header: array \"", name, "\" needs an integer offset and count and a dtype"));
  }
  const int64_t offset = a["offset"].get<int64_t>();
  const int64_t count = a["count"].get<int64_t>();
  if (a["dtype"].get<std::string>() != dtype) {
    return FileError(path, absl::StrCat("array ", name, ": dtype ", a["dtype"].get<std::string>(), ", want ", dtype));
  }
  if (count != want_count) {
    return FileError(path, absl::StrCat("array ", name, ": ", count, " elements, want ", want_count));
  }
  if (offset % 8 != 0 || offset < header_end || count < 0 ||
      count > (file_bytes - std::min(offset, file_bytes)) / static_cast<int64_t>(sizeof(T))) {
    return FileError(path, absl::StrCat("array ", name, ": offset ", offset, " and ", count,
                                        " elements do not lie 8-aligned between the header and the end of the file (",
                                        file_bytes, " bytes)"));
  }
  out.resize(static_cast<size_t>(count));
  in.seekg(offset);
  in.read(reinterpret_cast<char*>(out.data()), count * static_cast<int64_t>(sizeof(T)));
  if (!in) return FileError(path, absl::StrCat("array ", name, ": read failed"));
  return absl::OkStatus();
}

}  // namespace

absl::Status WriteDistillDataFile(const std::string& path, const DistillData& data) {
  const int32_t window = data.header.window;
  if (window < 1) return absl::InvalidArgumentError(absl::StrCat("window must be >= 1, got ", window));
  if (absl::Status s = CheckSplit("train", data.train, window); !s.ok()) return s;
  const int32_t group = data.header.windows_per_prefix;
  if (group < 1 || data.train.examples() % group != 0) {
    return absl::InvalidArgumentError(absl::StrCat(data.train.examples(), " train examples do not form groups of ",
                                                   group, " windows per prefix"));
  }
  for (int64_t i = 0; i < data.train.examples(); ++i) {
    if (data.train.start[i] != data.train.start[i - i % group]) {
      return absl::InvalidArgumentError(absl::StrCat("train example ", i, " does not share its group's start"));
    }
  }
  if (absl::Status s = CheckSplit("eval", data.eval, window); !s.ok()) return s;
  const std::vector<ArrayView> arrays = ArraysOf(data);
  std::vector<int64_t> offsets;
  const std::string header = LayOut(data, arrays, offsets);

  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) return WriteError(tmp, std::strerror(errno));
    out.write(kDistillDataMagic, kMagicBytes);
    const uint64_t header_bytes = header.size();
    out.write(reinterpret_cast<const char*>(&header_bytes), sizeof(header_bytes));
    out.write(header.data(), static_cast<std::streamsize>(header.size()));
    int64_t at = kPreambleBytes + static_cast<int64_t>(header.size());
    for (size_t i = 0; i < arrays.size(); ++i) {
      WriteZeros(out, offsets[i] - at);
      const int64_t bytes = arrays[i].count * arrays[i].element_bytes;
      if (bytes > 0) out.write(static_cast<const char*>(arrays[i].data), bytes);
      at = offsets[i] + bytes;
      WriteZeros(out, AlignUp8(at) - at);
      at = AlignUp8(at);
    }
    out.flush();
    if (!out) {
      const std::string reason = std::strerror(errno);
      out.close();
      std::remove(tmp.c_str());
      return WriteError(tmp, reason);
    }
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) {
    std::remove(tmp.c_str());
    return WriteError(path, absl::StrCat("renaming ", tmp, ": ", ec.message()));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> ReadDistillDataHeaderJson(const std::string& path) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot open ", path));
  const int64_t file_bytes = static_cast<int64_t>(in.tellg());
  in.seekg(0);
  char preamble[kPreambleBytes];
  if (file_bytes < kPreambleBytes || !in.read(preamble, kPreambleBytes)) {
    return FileError(path, "shorter than the 16-byte preamble");
  }
  if (std::memcmp(preamble, kDistillDataMagic, kMagicBytes) != 0) {
    return FileError(path, "not a crossreg distillation data file (no CRXDIST1 magic)");
  }
  uint64_t header_bytes;
  std::memcpy(&header_bytes, preamble + kMagicBytes, sizeof(header_bytes));
  if (header_bytes > kMaxHeaderBytes || static_cast<int64_t>(header_bytes) > file_bytes - kPreambleBytes) {
    return FileError(path, absl::StrCat("header length ", header_bytes, " runs past the end of the file (",
                                        file_bytes, " bytes)"));
  }
  std::string header(header_bytes, '\0');
  if (!in.read(header.data(), static_cast<std::streamsize>(header_bytes))) return FileError(path, "header read failed");
  return header;
}

absl::StatusOr<DistillData> ReadDistillDataFile(const std::string& path) {
  auto header_text = ReadDistillDataHeaderJson(path);
  if (!header_text.ok()) return header_text.status();
  const Json j = Json::parse(*header_text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return FileError(path, "the header is not a JSON object");
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  const int64_t file_bytes = static_cast<int64_t>(in.tellg());
  const int64_t header_end = kPreambleBytes + static_cast<int64_t>(header_text->size());
  DistillData data;
  try {
    if (j.at("format").get<std::string>() != kDistillDataFormat || j.at("version").get<int>() != kDistillDataVersion) {
      return FileError(path, absl::StrCat("format ", j.at("format").dump(), " version ", j.at("version").dump(),
                                          ", want ", kDistillDataFormat, " version ", kDistillDataVersion));
    }
    DistillDataHeader& h = data.header;
    h.model = j.at("model").get<std::string>();
    h.vocab_size = j.at("vocab_size").get<int64_t>();
    h.bos_id = j.at("bos_id").get<int32_t>();
    h.eos_id = j.at("eos_id").get<int32_t>();
    h.window = j.at("window").get<int32_t>();
    h.windows_per_prefix = j.value("windows_per_prefix", 1);
    h.prefix_min = j.at("prefix_min").get<int32_t>();
    h.prefix_max = j.at("prefix_max").get<int32_t>();
    h.seed = j.at("seed").get<uint64_t>();
    h.holdout_pct = j.at("holdout_pct").get<double>();
    h.temperature = j.at("temperature").get<double>();
    h.sources = j.at("sources").get<std::vector<std::string>>();
    h.backend = j.at("backend").get<std::string>();
    h.seconds = j.at("seconds").get<double>();
    if (h.window < 1) return FileError(path, absl::StrCat("header: window ", h.window));
    const Json& arrays = j.at("arrays");
    for (const char* split_name : kSplitNames) {
      DistillSplitData& s = std::string(split_name) == "train" ? data.train : data.eval;
      const Json& counts = j.at("splits").at(split_name);
      s.documents = counts.at("documents").get<int64_t>();
      const int64_t stream_tokens = counts.at("stream_tokens").get<int64_t>();
      const int64_t examples = counts.at("examples").get<int64_t>();
      if (examples < 0 || examples > file_bytes / 8) {
        return FileError(path, absl::StrCat("header: ", split_name, " has ", examples, " examples"));
      }
      const std::string p = std::string(split_name) + ".";
      absl::Status s1 = ReadArray(in, path, file_bytes, header_end, arrays, p + "stream", "int32", stream_tokens, s.stream);
      if (!s1.ok()) return s1;
      s1 = ReadArray(in, path, file_bytes, header_end, arrays, p + "start", "int64", examples, s.start);
      if (!s1.ok()) return s1;
      s1 = ReadArray(in, path, file_bytes, header_end, arrays, p + "length", "int32", examples, s.length);
      if (!s1.ok()) return s1;
      s1 = ReadArray(in, path, file_bytes, header_end, arrays, p + "continuation", "int32", examples * h.window,
                     s.continuation);
      if (!s1.ok()) return s1;
      if (absl::Status c = CheckSplit(split_name, s, h.window); !c.ok()) return FileError(path, std::string(c.message()));
    }
  } catch (const Json::exception& e) {
    return FileError(path, absl::StrCat("header: ", e.what()));
  }
  return data;
}

}  // namespace crossreg
