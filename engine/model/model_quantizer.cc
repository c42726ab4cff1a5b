#include "engine/model/model_quantizer.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <memory>
#include <thread>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_format.h"
#include "engine/quant/ggml_blocks.h"

namespace crossreg {

absl::StatusOr<DType> ParseQuantizeType(const std::string& name) {
  const std::string n = absl::AsciiStrToLower(name);
  if (n.empty() || n == "none") return DType::kF32;
  if (n == "q8_0") return DType::kQ8_0;
  if (n == "q4_0") return DType::kQ4_0;
  if (n == "q4_k") return DType::kQ4_K;
  if (n == "q5_k") return DType::kQ5_K;
  if (n == "q6_k") return DType::kQ6_K;
  return absl::InvalidArgumentError(
      absl::StrCat("quantize: unknown type '", name, "'; expected none, q8_0, q4_0, q4_k, q5_k or q6_k"));
}

std::string QuantizeSummary::Describe(DType type) const {
  std::string out = absl::StrFormat("quantized %d matrices to %s", quantized, DTypeName(type));
  if (fallback_q8_0 > 0) {
    absl::StrAppendFormat(&out, " (%d to Q8_0: rows not whole blocks of %d)", fallback_q8_0,
                          DTypeBlockElements(type));
  }
  if (kept > 0) absl::StrAppendFormat(&out, ", %d kept as they were (rows not whole blocks of 32)", kept);
  absl::StrAppendFormat(&out, ", %.1f MB -> %.1f MB", bytes_before / 1e6, bytes_after / 1e6);
  if (weights > 0 && seconds > 0) {
    absl::StrAppendFormat(&out, " in %.2f s (%.0f M weights/s)", seconds, static_cast<double>(weights) / seconds / 1e6);
  }
  return out;
}

QuantizeSummary QuantizeModel(Model& model, DType type, int threads) {
  QuantizeSummary summary;
  if (!IsQuantized(type)) return summary;
  const auto start = std::chrono::steady_clock::now();
  ModelWeights& w = model.weights;
  const bool tied = w.output.data == w.tok_embeddings.data;
  std::vector<TensorRef*> matrices = {&w.tok_embeddings};
  if (!tied) matrices.push_back(&w.output);
  for (auto& l : w.layers) {
    for (TensorRef* t : {&l.wq, &l.wk, &l.wv, &l.wo, &l.w_gate, &l.w_up, &l.w_down}) matrices.push_back(t);
  }
  // Each matrix's target type first (one thread), then the work in parallel.
  std::vector<DType> target(matrices.size(), DType::kF32);
  for (size_t i = 0; i < matrices.size(); ++i) {
    const TensorRef& t = *matrices[i];
    if (t.empty() || IsQuantized(t.dtype)) continue;
    summary.bytes_before += t.nbytes();
    if (t.cols() % DTypeBlockElements(type) == 0) {
      target[i] = type;
      ++summary.quantized;
      summary.weights += t.numel();
    } else if (t.cols() % 32 == 0) {
      target[i] = DType::kQ8_0;
      ++summary.fallback_q8_0;
      summary.weights += t.numel();
    } else {
      ++summary.kept;
      summary.bytes_after += t.nbytes();
    }
  }
  std::vector<std::shared_ptr<std::vector<unsigned char>>> buffers(matrices.size());
  std::atomic<size_t> next{0};
  auto work = [&] {
    std::vector<float> row;
    for (size_t i = next++; i < matrices.size(); i = next++) {
      if (!IsQuantized(target[i])) continue;
      const TensorRef& t = *matrices[i];
      const int64_t cols = t.cols();
      auto out = std::make_shared<std::vector<unsigned char>>(DTypeBytes(target[i], t.numel()));
      row.resize(static_cast<size_t>(cols));
      const size_t src_row = t.row_bytes(), dst_row = DTypeBytes(target[i], cols);
      for (int64_t r = 0; r < t.rows(); ++r) {
        ConvertToF32(t.dtype, static_cast<const char*>(t.data) + r * src_row, row.data(), row.size());
        quant::Quantize(target[i], row.data(), out->data() + r * dst_row, cols);
      }
      buffers[i] = std::move(out);
    }
  };
  std::vector<std::thread> pool;
  for (int i = 1; i < std::max(1, threads); ++i) pool.emplace_back(work);
  work();
  for (auto& th : pool) th.join();
  for (size_t i = 0; i < matrices.size(); ++i) {
    if (buffers[i] == nullptr) continue;
    TensorRef& t = *matrices[i];
    t = TensorRef{target[i], t.shape, buffers[i]->data()};
    summary.bytes_after += buffers[i]->size();
    w.storage.push_back(buffers[i]);
  }
  if (tied) w.output = w.tok_embeddings;
  summary.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return summary;
}

}  // namespace crossreg
