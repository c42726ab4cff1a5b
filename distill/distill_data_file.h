// The file crossreg-distill-data writes and the drafter trainer reads
// (`python3 -m training distill --data FILE`). Little-endian:
//   bytes 0..7     ASCII magic "CRXDIST1"
//   bytes 8..15    uint64 H, the length of the header JSON
//   bytes 16..16+H the header JSON (UTF-8): run parameters, "splits" (per split:
//                  documents, stream_tokens, examples) and "arrays"
//   then the arrays, each at its "arrays" entry's absolute "offset" (a multiple of 8,
//   zero padding before it) with its "dtype" ("int32" or "int64") and element "count":
//     <split>.stream        int32 [stream_tokens]  the split's token stream
//     <split>.start         int64 [examples]       prefix starts in the stream
//     <split>.length        int32 [examples]       prefix lengths
//     <split>.continuation  int32 [examples * window]  the base model's greedy tokens
//   for the splits "train" and "eval". The header's "windows_per_prefix" K groups the
//   train examples in runs of K with one start (nested prefixes). Example i's prefix is
//   stream[start[i] : start[i] + length[i]]; its continuation is
//   continuation[i * window : (i + 1) * window].
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace crossreg {

inline constexpr char kDistillDataMagic[] = "CRXDIST1";  // 8 bytes, no terminator in the file
inline constexpr char kDistillDataFormat[] = "crossreg-distill-data";
inline constexpr int kDistillDataVersion = 1;

// The header's run parameters (everything but "splits" and "arrays").
struct DistillDataHeader {
  std::string model;  // the resolved model path
  int64_t vocab_size = 0;
  int32_t bos_id = -1;  // -1: none in the streams
  int32_t eos_id = -1;
  int32_t window = 0;  // continuation tokens per example
  int32_t windows_per_prefix = 1;  // train examples in runs of this many sharing a start
  int32_t prefix_min = 0;
  int32_t prefix_max = 0;
  uint64_t seed = 0;  // train prefixes; eval prefixes use seed + 1
  double holdout_pct = 0;
  double temperature = 0;  // 0: greedy continuations
  std::vector<std::string> sources;  // --prompts, as given
  std::string backend;               // "cpu (AMD EPYC 9B45, 2 threads, SIMD avx512)"
  double seconds = 0;                // generating the continuations
};

struct DistillSplitData {
  int64_t documents = 0;
  std::vector<int32_t> stream;        // [stream_tokens]
  std::vector<int64_t> start;         // [examples]
  std::vector<int32_t> length;        // [examples]
  std::vector<int32_t> continuation;  // [examples * window]

  int64_t examples() const { return static_cast<int64_t>(start.size()); }
};

struct DistillData {
  DistillDataHeader header;
  DistillSplitData train;
  DistillSplitData eval;
  // Not in the file: prompt tokens the engine's prefix cache served, of those looked up.
  int64_t prompt_tokens_cached = 0;
  int64_t prompt_tokens_looked_up = 0;
};

// Writes `path`.tmp, then renames it to `path`, so that a crash never leaves half a
// file under the name. Fails (writing nothing) when a split's arrays disagree in
// size with each other or with the window, or a prefix lies outside its stream.
absl::Status WriteDistillDataFile(const std::string& path, const DistillData& data);

// Reads and checks a whole file: magic, header, every array's dtype, count, offset
// (a multiple of 8, after the header, inside the file) and the prefixes' bounds.
absl::StatusOr<DistillData> ReadDistillDataFile(const std::string& path);

// The header JSON of a file, unparsed (tests and tools that look at offsets).
absl::StatusOr<std::string> ReadDistillDataHeaderJson(const std::string& path);

}  // namespace crossreg
