// Launchers of the CUDA backend's kernels. Plain types only (no Abseil) so the .cu
// files stay light; every pointer is device memory, every launch goes on `stream`
// and returns the launch error (asynchronous faults surface at the next sync).
// Each kernel's CPU reference is named beside it; tests/gpu checks each pair.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <string>

namespace crossreg::cuda {

using Bf16 = __nv_bfloat16;

// The largest head_dim the attention kernel holds in registers (8 values a lane).
inline constexpr int kMaxHeadDim = 256;

// out[r] = f32(table[tokens[r]]), table (vocab, hidden) bf16.   CPU: cpu::EmbeddingRow.
cudaError_t LaunchEmbeddingGather(const Bf16* table, int hidden, const int32_t* tokens, int rows, float* out,
                                  cudaStream_t stream);

// Per row of n: out = weight * (x / sqrt(mean(x²) + eps)).   CPU: cpu::RmsNorm.
// out_bf16, if given, receives bf16(out) too (the next GEMM's input, no separate cast).
cudaError_t LaunchRmsNorm(const float* x, const float* weight, int rows, int n, float eps, float* out,
                          cudaStream_t stream, Bf16* out_bf16 = nullptr);

// In place, NeoX/HF pairs (i, i + head_dim/2) of each head, angle float(positions[r]) *
// inv_freq[i]. Row r starts at x + r * row_stride.   CPU: cpu::ApplyRope.
cudaError_t LaunchRope(float* x, int rows, int64_t row_stride, int num_heads, int head_dim,
                       const int32_t* positions, const float* inv_freq, cudaStream_t stream);

// gate_up rows are [gate (width) | up (width)]; out (rows, width) = silu(gate) * up.
// CPU: cpu::SwiGlu. out_bf16, if given, receives bf16(out) too.
cudaError_t LaunchSwiGlu(const float* gate_up, int rows, int width, float* out, cudaStream_t stream,
                         Bf16* out_bf16 = nullptr);

// out[i] += x[i] (the residual stream).   CPU: cpu::AddInPlace.
cudaError_t LaunchAddInPlace(float* out, const float* x, int64_t n, cudaStream_t stream);

// y[r][0, width) += bias, rows of stride `stride` (Qwen2's q/k/v bias).   CPU: cpu::AddInPlace.
cudaError_t LaunchAddBias(float* y, int rows, int width, int64_t stride, const float* bias, cudaStream_t stream);

// y = bf16(x), round to nearest even (the GEMM input).   CPU: F32ToBf16.
cudaError_t LaunchCastToBf16(const float* x, Bf16* y, int64_t n, cudaStream_t stream);

// dst[i] = src[rows[i]][0, width), src rows of stride src_stride.   CPU: a row copy.
cudaError_t LaunchGatherRows(const float* src, int64_t src_stride, int width, const int32_t* rows, int count,
                             float* dst, cudaStream_t stream);

// dst[rows[i]][0, width) += src[i], dst rows of stride dst_stride. `rows` has no repeats.
cudaError_t LaunchScatterAddRows(const float* src, int width, const int32_t* rows, int count, float* dst,
                                 int64_t dst_stride, cudaStream_t stream);

// A row of logits reduced for greedy decoding: its argmax (the lowest index among equal
// maxima; index 0 when z[0] is NaN or no value exceeds -inf, as the CPU's sequential
// scan), z at it, and z at a named token (z at the argmax when none). The same 12 bytes
// as crossreg::RowSummary (engine/forward_output.h), which the backend copies into.
struct LogitSummary {
  int32_t argmax;
  float max_logit;
  float token_logit;
};

// out[i] = summary of logits row rows[i] (rows of `vocab` floats) with token tokens[i]
// (-1: none).   CPU: SummarizeLogitRow.
cudaError_t LaunchSummarizeLogitRows(const float* logits, int vocab, const int32_t* rows, const int32_t* tokens,
                                     int count, LogitSummary* out, cudaStream_t stream);

// The paged cache's element type (the forward's predictive scratch stays f32, as on the CPU).
enum class KvElement { kF32, kBf16 };
// The cache of one layer: keys and values [slot][kv_dim] of `element` (bf16 rounded to
// nearest even, as the CPU's --kv_dtype bf16).
struct KvCacheRef {
  void* k = nullptr;
  void* v = nullptr;
  KvElement element = KvElement::kF32;
};

// Writes each row's K and V (columns [k_col, k_col+kv_dim) and [v_col, ...) of `qkv`)
// to the paged cache at slots[r] (control rows), or, where slots[r] < 0 (predictive
// rows), to row r of the forward's scratch pred_k / pred_v.   CPU: the copy in
// CpuBackend::RunLayer.
cudaError_t LaunchStoreKv(const float* qkv, int rows, int64_t row_stride, int k_col, int v_col, int kv_dim,
                          const int32_t* slots, KvCacheRef cache, float* pred_k, float* pred_v, cudaStream_t stream);

// LaunchRope over the Q and K heads of qkv rows ([q (num_heads) | k (num_kv_heads) |
// v] heads of head_dim), then LaunchStoreKv of the rotated K and the V, in one pass:
// the same bits as the two launches.
cudaError_t LaunchRopeStoreKv(float* qkv, int rows, int64_t row_stride, int num_heads, int num_kv_heads, int head_dim,
                              const int32_t* positions, const float* inv_freq, const int32_t* slots, KvCacheRef cache,
                              float* pred_k, float* pred_v, cudaStream_t stream);

// Ragged paged attention: one thread block per (row, query heads sharing a KV head,
// split of the positions), online softmax over the positions the row attends. Row r attends num_cached[r] positions of its sequence's
// paged cache (block_tables + table_offset[r]), then num_own[r] rows of its
// predictive group (group_rows + group_begin[r], scratch K/V rows). Control rows:
// num_cached = position + 1, num_own = 0. GQA: head h reads KV head h / (H / H_kv).
// CPU: cpu::PagedAttention (engine/cpu/paged_attention.h), the CPU backend's own attention.
// With partial_acc/partial_ml (AttentionPartialFloats(rows, ...) floats, acc first, then
// 2 per split) each row's positions are split kAttentionSplits ways by a rule that
// reads only that row's count, and the last split to finish merges them; without them
// one block walks all of a row's positions (large prefill forwards).
inline constexpr int kAttentionSplits = 32;
// Rows of one sequence (same block table, same chunk) that share one block's loads of
// the cached keys and values: the 1 + m + γ rows of a Cross-Regression step read
// their prefix once instead of once per row.
inline constexpr int kAttentionTileRows = 4;

// Positions per split for a row attending n positions: the smallest power-of-two
// multiple of 16 that needs at most kAttentionSplits splits. It reads n alone, so a
// row splits the same way in any batch; rows of a tile share it.
__host__ __device__ inline int AttentionSplitChunk(int n) {
  int chunk = 16;
  while (chunk * kAttentionSplits < n) chunk *= 2;
  return chunk;
}

// Groups consecutive rows with the same table offset and split chunk into tiles of
// at most kAttentionTileRows: tile_first[t] (first row) and tile_rows[t] (count) for
// t < tiles; the remaining entries of the `rows`-long arrays get -1 and 0.
// With split_predictive_apart, control rows (num_own 0) tile as above and come first
// (tiles [0, control_tiles)); predictive rows (num_own > 0) tile by sequence alone,
// whatever their chunks, after them. Predictive rows need no batch invariance (their
// logits are drafts, never verdicts), so their tiles may split by the forward's shape
// (PagedAttentionParams::predictive_splits) instead of 32 ways each.
struct AttentionTiles {
  int tiles = 0;
  int max_rows = 0;  // rows of the largest tile
  int control_tiles = 0;            // with split_predictive_apart: control tiles first
  int control_max_rows = 0;         //   and the largest of each kind
  int predictive_max_rows = 0;
};
// Apart, a predictive tile holds consecutive rows of one predictive group (same table,
// cached count and group_begin) up to predictive_tile_rows (the SIMT kernel's
// kAttentionTileRows, or the tensor-core kernel's PredictiveAttentionMmaTileRows).
AttentionTiles PlanAttentionTiles(const int32_t* table_offset, const int32_t* num_cached, const int32_t* num_own,
                                  int rows, int32_t* tile_first, int32_t* tile_rows,
                                  bool split_predictive_apart = false, const int32_t* group_begin = nullptr,
                                  int predictive_tile_rows = kAttentionTileRows);
// Splits for the predictive tiles of a forward: enough blocks for about two per SM
// (pred_tiles · head_groups blocks per split), 1 to kAttentionSplits.
int PredictiveAttentionSplits(int predictive_tiles, int head_groups, int sm_count);

struct PagedAttentionParams {
  const float* q = nullptr;  // (rows, q_stride); head h at column h * head_dim
  int64_t q_stride = 0;
  const void* k_cache = nullptr;  // this layer: [slot][kv_dim] of cache_element
  const void* v_cache = nullptr;
  KvElement cache_element = KvElement::kF32;
  const float* pred_k = nullptr;  // [row][kv_dim], predictive rows only
  const float* pred_v = nullptr;
  const int32_t* block_tables = nullptr;  // all rows' sequences' tables, concatenated
  const int32_t* table_offset = nullptr;  // per row
  const int32_t* num_cached = nullptr;    // per row
  const int32_t* num_own = nullptr;       // per row
  const int32_t* group_begin = nullptr;   // per row, into group_rows
  const int32_t* group_rows = nullptr;    // predictive row indices grouped by sequence
  const int32_t* tile_first = nullptr;    // rows entries, from PlanAttentionTiles
  const int32_t* tile_rows = nullptr;     // rows entries
  int tiles = 0;                          // from PlanAttentionTiles: the grid's first dimension
  int max_tile_rows = 0;                  //   and the block's rows
  // > 0 (tiles planned with split_predictive_apart): tiles [control_tiles, tiles) hold
  // predictive rows and split predictive_splits ways (even chunks of the tile's longest
  // row) in a launch of their own; 0: every tile splits by the per-row rule.
  int predictive_splits = 0;
  bool predictive_mma = false;  // predictive tiles on the tensor-core kernel
  int control_tiles = 0;
  int control_max_tile_rows = 0;
  int predictive_max_tile_rows = 0;
  // Set by the launcher: the first tile of this launch, its splits, and whether the
  // last split of a one-row tile merges in place (else MergeSplitsKernel does).
  int tile_base = 0;
  int launch_splits = 0;
  bool per_row_chunks = true;
  bool merge_in_kernel = false;
  float* out = nullptr;  // (rows, out_stride)
  Bf16* out_bf16 = nullptr;  // optional (rows, out_stride): bf16(out), the O GEMM's input
  int64_t out_stride = 0;
  float* partial_acc = nullptr;  // optional split workspace: [rows][num_heads][splits][head_dim]
  float* partial_ml = nullptr;   //   and [rows][num_heads][splits][2] (max, sum)
  // With the split workspace: rows · num_heads ints, zero before the first launch; each
  // launch leaves them zero (the last split of a tile and head group merges and resets).
  int32_t* split_counters = nullptr;
  int rows = 0;
  int num_heads = 0;
  int num_kv_heads = 0;
  int head_dim = 0;  // <= kMaxHeadDim
  int block_size = 0;
  float scale = 0.0f;  // 1/sqrt(head_dim)
};
cudaError_t LaunchPagedAttention(const PagedAttentionParams& p, cudaStream_t stream);
// The launch's shape in words (rows, tiles and their row counts, splits, kernels), for
// the error a failed LaunchPagedAttention returns.
std::string DescribeAttentionLaunch(const PagedAttentionParams& p);
// Floats of split workspace a forward of `rows` needs (partial_acc, then partial_ml).
size_t AttentionPartialFloats(int rows, int num_heads, int head_dim);
// Query heads one block serves: the largest of 4, 2, 1 dividing the GQA group.
int AttentionHeadsPerBlock(int num_heads, int num_kv_heads);

// The predictive rows' attention on tensor cores (predictive_attention_mma.cu): tiles of
// one predictive group, 64 query vectors (rows × the heads of a KV head) a block, bf16
// products with f32 accumulation and softmax, head_dim 64 or 128. Writes the split
// partials of tiles [tile_base, tile_base + tiles), `splits` ways; MergeSplitsKernel
// combines them. CPU: cpu::PagedAttention, to bf16's precision.
inline constexpr int kMaxPredictiveTileRows = 16;
bool PredictiveAttentionMmaSupported(int head_dim);
int PredictiveAttentionMmaTileRows(int num_heads, int num_kv_heads);
cudaError_t LaunchPredictiveAttentionMma(const PagedAttentionParams& p, int tile_base, int tiles, int splits,
                                         cudaStream_t stream);


// The predictive rows' LoRA update for up to three targets that read the same input
// (q, k, v; gate, up; o; down), without gathering or scattering rows:
//   shrink: mid[i][rank_offset[t] + j] = Σ_k x[rows[i]][k] · a_t[j][k], in
//           LoraShrinkSplits(in) partial sums over K ([split][i][rank]: mid holds
//           splits · count · total_rank floats)
//   expand: y[rows[i]][col[t] + c] += scale[t] · Σ_j mid[i][rank_offset[t] + j] · b_t[c][j]
// rows has no repeats; the group's ranks add up to at most kMaxLoraGroupRank.
// CPU: the LoRA update in engine/cpu (x·Aᵀ, then scale·(·)·Bᵀ).
inline constexpr int kMaxLoraTargetsPerGroup = 3;
inline constexpr int kMaxLoraGroupRank = 1024;
int LoraShrinkSplits(int in);
struct LoraGroup {
  int targets = 0;
  const float* a[kMaxLoraTargetsPerGroup] = {};  // (rank, in)
  const float* b[kMaxLoraTargetsPerGroup] = {};  // (out, rank)
  int rank[kMaxLoraTargetsPerGroup] = {};
  int out[kMaxLoraTargetsPerGroup] = {};
  int64_t col[kMaxLoraTargetsPerGroup] = {};  // first column of the target in y
  float scale[kMaxLoraTargetsPerGroup] = {};
  int total_rank() const {
    int sum = 0;
    for (int t = 0; t < targets; ++t) sum += rank[t];
    return sum;
  }
};
cudaError_t LaunchLoraShrink(const LoraGroup& g, const float* x, int64_t x_stride, int in, const int32_t* rows,
                             int count, float* mid, cudaStream_t stream);
cudaError_t LaunchLoraExpand(const LoraGroup& g, const float* mid, int in, const int32_t* rows, int count, float* y,
                             int64_t ldy, cudaStream_t stream);

// y (rows, out; row stride ldy) = beta·y + x (rows, in; bf16, contiguous) · w (out, in;
// bf16)ᵀ for at most kMaxGemvRows rows, f32 accumulate: the decode GEMM (GemmBf16 picks
// it where GemvBf16Fits). CPU: cpu::LinearReference on the same bf16 values.
inline constexpr int kMaxGemvRows = 4;
bool GemvBf16Fits(const Bf16* x, int64_t rows, int64_t in, const Bf16* w);
cudaError_t LaunchGemvBf16(const Bf16* x, int rows, int in, const Bf16* w, int out, float* y, int64_t ldy, float beta,
                           cudaStream_t stream);

// FP8 weights (--weights fp8): row o of an (out, in) matrix is e4m3 codes with one f32
// scale, w[o][k] = e4m3(codes[o][k]) · scale[o] (engine/quant/fp8_e4m3.h is the format and
// its CPU twin). Quantization at load: scale[o] = max_k |w[o][k]| / 448, codes =
// e4m3(w / scale), round to nearest even, saturating.   CPU: QuantizeRowFp8E4M3.
cudaError_t LaunchQuantizeRowsFp8(const Bf16* w, int64_t out, int64_t in, uint8_t* codes, float* scale,
                                  cudaStream_t stream);
// y = beta·y + (x · codesᵀ) · scale[o] per column o, for at most kMaxGemvFp8Rows rows of
// bf16 x: the decode GEMM on FP8 weights, half the bytes of bf16 (one warp per output
// column, 16 codes per 16-byte load, f32 accumulate, fixed-order reduction).
// CPU: the f32 sum of Fp8E4M3ToF32(code) · x, times the scale.
inline constexpr int kMaxGemvFp8Rows = 8;
bool GemvFp8Fits(const Bf16* x, int64_t rows, int64_t in, const uint8_t* codes);
cudaError_t LaunchGemvFp8(const Bf16* x, int rows, int in, const uint8_t* codes, const float* scale, int out, float* y,
                          int64_t ldy, float beta, cudaStream_t stream);
// w (out, in) bf16 = bf16(e4m3(codes) · scale[o]): wider forwards run cuBLAS's bf16 GEMM
// on a per-GEMM scratch copy.   CPU: F32ToBf16(Fp8E4M3ToF32(code) · scale).
cudaError_t LaunchDequantizeFp8(const uint8_t* codes, const float* scale, int64_t out, int64_t in, Bf16* w,
                                cudaStream_t stream);

// Deterministic uniform fill in [-scale, scale) (+ offset) from a counter hash: the
// benchmark's random weights, made on the device.
cudaError_t LaunchFillUniformBf16(Bf16* x, int64_t n, float offset, float scale, uint64_t seed,
                                  cudaStream_t stream);
cudaError_t LaunchFillUniformF32(float* x, int64_t n, float offset, float scale, uint64_t seed,
                                 cudaStream_t stream);

}  // namespace crossreg::cuda
