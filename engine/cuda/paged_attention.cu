// Ragged paged attention, flash-decoding style. One thread block per (tile of rows of
// one sequence, group of query heads that share a KV head, split of the attended
// positions); one warp per (row, head) of the block. The block copies each group of
// kSub cached key and value rows into shared memory once for all its rows and heads
// (GQA, and the 1 + m + γ rows of a Cross-Regression step), and the splits put enough
// blocks in flight when a forward has few rows: one block of 4 warps per (row, head)
// and no splits leaves most SMs idle for one AR row of an 8B model (32 blocks on 132
// SMs), and attention then cost ten times what it does split (docs/benchmarks.md, "GPU:
// NVIDIA H100 and H200", has the layer's times).
//
// A warp walks its row's positions of the split in order with an online softmax;
// lanes split head_dim. A row's positions, their order, and its split layout
// (AttentionSplitChunk) depend only on the row itself, and a key read from shared
// memory is the same value as one read from the cache, so a row's output bits do not
// depend on the other rows of the forward while it takes the split path. The splits'
// partial results are merged by a second kernel in split order.
#include <cuda_runtime.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <string>

#include "engine/cuda/kernels.h"

namespace crossreg::cuda {
namespace {

constexpr int kSub = 16;   // positions staged in shared memory at a time
constexpr int kGroup = 4;  // positions a warp scores together

// kHeads query heads of one KV head; kDims = head_dim / 32 rounded up (values a lane holds).
// Merges a (row, head)'s splits, one warp: Σ_s acc_s·e^(m_s−M) / Σ_s l_s·e^(m_s−M),
// lane s weighing split s (fixed-order reductions), each dimension summed over the
// splits in split order. Other blocks wrote the partials: read past L1 (__ldcg).
// A row's splits: kAttentionSplits, or predictive_splits for predictive rows when they
// split apart (the splits past them were never written).
__device__ __forceinline__ int SplitsOf(const PagedAttentionParams& p, int r) {
  return p.predictive_splits > 0 && p.num_own[r] > 0 ? p.predictive_splits : kAttentionSplits;
}

__device__ void MergeSplits(const PagedAttentionParams& p, int r, int h, int lane, float* factors) {
  static_assert(kAttentionSplits == 32, "one lane per split");
  const int hd = p.head_dim;
  const int used = SplitsOf(p, r);
  const int64_t first = (static_cast<int64_t>(r) * p.num_heads + h) * kAttentionSplits;
  const float m = lane < used ? __ldcg(p.partial_ml + 2 * (first + lane)) : -INFINITY;
  const float l = lane < used ? __ldcg(p.partial_ml + 2 * (first + lane) + 1) : 0.0f;
  float overall = l > 0.0f ? m : -INFINITY;
  for (int offset = 16; offset > 0; offset /= 2) overall = fmaxf(overall, __shfl_xor_sync(0xffffffffu, overall, offset));
  const float factor = l > 0.0f ? expf(m - overall) : 0.0f;
  float denom = l * factor;
  for (int offset = 16; offset > 0; offset /= 2) denom += __shfl_xor_sync(0xffffffffu, denom, offset);
  const float inv_denom = 1.0f / denom;
  factors[lane] = factor;
  __syncwarp();
  for (int d = lane; d < hd; d += 32) {
    float value = 0.0f;
    for (int s = 0; s < used; ++s) value += __ldcg(p.partial_acc + (first + s) * hd + d) * factors[s];
    const float out = value * inv_denom;
    const int64_t at = r * p.out_stride + static_cast<int64_t>(h) * hd + d;
    p.out[at] = out;
    if (p.out_bf16 != nullptr) p.out_bf16[at] = __float2bfloat16_rn(out);
  }
}

// kTileRows: rows per tile at most, one warp each per head (the launch picks the
// smallest that holds the forward's largest tile, so AR blocks have no idle warps).
// A cached element as f32, and four of them (16-byte or 8-byte aligned) at once.
__device__ __forceinline__ float ToFloat(float v) { return v; }
__device__ __forceinline__ float ToFloat(Bf16 v) { return __bfloat162float(v); }
__device__ __forceinline__ float4 Load4(const float* p) { return *reinterpret_cast<const float4*>(p); }
__device__ __forceinline__ float4 Load4(const Bf16* p) {
  const uint2 bits = *reinterpret_cast<const uint2*>(p);
  return make_float4(__uint_as_float(bits.x << 16), __uint_as_float(bits.x & 0xffff0000u),
                     __uint_as_float(bits.y << 16), __uint_as_float(bits.y & 0xffff0000u));
}

// KvT: the cache's element (float or Bf16); shared memory and the math stay f32.
template <int kHeads, int kDims, int kTileRows, typename KvT>
__global__ void __launch_bounds__(kTileRows * kHeads * 32, 1) PagedAttentionKernel(PagedAttentionParams p) {
  constexpr int kThreads = kTileRows * kHeads * 32;
  const KvT* k_cache = static_cast<const KvT*>(p.k_cache);
  const KvT* v_cache = static_cast<const KvT*>(p.v_cache);
  const int tile = p.tile_base + blockIdx.x;
  const int first = p.tile_first[tile];
  if (first < 0) return;  // fewer tiles than rows
  const int tile_rows = p.tile_rows[tile];
  const int h0 = blockIdx.y * kHeads;
  const int warp = threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  const int i = warp / kHeads;  // row of the tile
  const int h = h0 + warp % kHeads;
  const bool active = i < tile_rows;
  const int r = first + (active ? i : 0);
  const int hd = p.head_dim;
  const int kv_dim = p.num_kv_heads * hd;
  const int64_t kv_off = static_cast<int64_t>(h0 / (p.num_heads / p.num_kv_heads)) * hd;
  const bool split = p.partial_acc != nullptr;

  // Cached positions every row of the tile attends (read through shared memory), and
  // the tile's furthest position.
  int shared_limit = INT_MAX, tile_n = 0;
  for (int k = 0; k < tile_rows; ++k) {
    shared_limit = min(shared_limit, p.num_cached[first + k]);
    tile_n = max(tile_n, p.num_cached[first + k] + p.num_own[first + k]);
  }
  const int n_cached = p.num_cached[r];
  const int n = n_cached + p.num_own[r];
  int begin = 0, end = tile_n;
  if (split) {
    // Control rows: the per-row rule, the same for every row of the tile. Predictive
    // tiles split apart: even 16-aligned chunks of the tile's longest row.
    const int chunk = p.per_row_chunks
                          ? AttentionSplitChunk(n)
                          : ((tile_n + p.launch_splits - 1) / p.launch_splits + 15) / 16 * 16;
    begin = blockIdx.z * chunk;
    end = min(tile_n, begin + chunk);
  }

  float q[kDims], acc[kDims];
  const float* q_row = p.q + r * p.q_stride + static_cast<int64_t>(h) * hd;
#pragma unroll
  for (int d = 0; d < kDims; ++d) {
    q[d] = lane + 32 * d < hd ? q_row[lane + 32 * d] : 0.0f;
    acc[d] = 0.0f;
  }
  float m = -INFINITY;  // running max of the scores
  float l = 0.0f;       // running Σ exp(score - m)

  constexpr int kRow = kDims * 32;  // shared-memory floats per position
  __shared__ __align__(16) float ks[kSub * kRow];
  __shared__ __align__(16) float vs[kSub * kRow];
  const int32_t* table = p.block_tables + p.table_offset[first];
  const int32_t* group = p.group_rows + p.group_begin[r];
  for (int base = begin; base < end; base += kSub) {
    __syncthreads();  // the previous positions are consumed
    const int staged = min(kSub, min(end, shared_limit) - base);
    if (hd % 4 == 0) {
      // Up to four float4 loads of keys and four of values in flight per thread, then
      // the stores (as many as a full group of positions needs: wide blocks need one,
      // and more would spill under their 64-register limit).
      constexpr int kUnroll = (kSub * kRow / 4 + kThreads - 1) / kThreads < 4 ? (kSub * kRow / 4 + kThreads - 1) / kThreads : 4;
      const int hd4 = hd / 4;
      const int total = staged * hd4;
      for (int e0 = 0; e0 < total; e0 += kUnroll * kThreads) {
        float4 kb[kUnroll], vb[kUnroll];
        int at[kUnroll];
#pragma unroll
        for (int u = 0; u < kUnroll; ++u) {
          const int e = e0 + threadIdx.x + u * kThreads;
          at[u] = -1;
          if (e < total) {
            const int pos = e / hd4, d4 = e - pos * hd4;
            const int t = base + pos;
            const int64_t slot = static_cast<int64_t>(table[t / p.block_size]) * p.block_size + t % p.block_size;
            kb[u] = Load4(k_cache + slot * kv_dim + kv_off + 4 * d4);
            vb[u] = Load4(v_cache + slot * kv_dim + kv_off + 4 * d4);
            at[u] = pos * kRow + 4 * d4;
          }
        }
#pragma unroll
        for (int u = 0; u < kUnroll; ++u) {
          if (at[u] >= 0) {
            *reinterpret_cast<float4*>(ks + at[u]) = kb[u];
            *reinterpret_cast<float4*>(vs + at[u]) = vb[u];
          }
        }
      }
    } else {
      for (int e = threadIdx.x; e < staged * hd; e += kThreads) {
        const int pos = e / hd, d = e % hd;
        const int t = base + pos;
        const int64_t slot = static_cast<int64_t>(table[t / p.block_size]) * p.block_size + t % p.block_size;
        ks[pos * kRow + d] = ToFloat(k_cache[slot * kv_dim + kv_off + d]);
        vs[pos * kRow + d] = ToFloat(v_cache[slot * kv_dim + kv_off + d]);
      }
    }
    __syncthreads();
    if (!active) continue;
    const int stop = min(base + kSub, min(end, n));
    // kGroup positions at a time: their dot products and shuffle reductions overlap
    // (one position at a time was a chain of ~250 dependent cycles per position).
    for (int t0 = base; t0 < stop; t0 += kGroup) {
      float k[kGroup][kDims], v[kGroup][kDims];
#pragma unroll
      for (int g = 0; g < kGroup; ++g) {
        const int t = t0 + g;
        if (t >= stop) {
#pragma unroll
          for (int d = 0; d < kDims; ++d) k[g][d] = v[g][d] = 0.0f;
        } else if (t - base < staged) {
#pragma unroll
          for (int d = 0; d < kDims; ++d) {
            k[g][d] = ks[(t - base) * kRow + lane + 32 * d];
            v[g][d] = vs[(t - base) * kRow + lane + 32 * d];
          }
        } else if (t < n_cached) {
          const int64_t slot = static_cast<int64_t>(table[t / p.block_size]) * p.block_size + t % p.block_size;
          const KvT* key = k_cache + slot * kv_dim + kv_off;
          const KvT* value = v_cache + slot * kv_dim + kv_off;
#pragma unroll
          for (int d = 0; d < kDims; ++d) {
            k[g][d] = lane + 32 * d < hd ? ToFloat(key[lane + 32 * d]) : 0.0f;
            v[g][d] = lane + 32 * d < hd ? ToFloat(value[lane + 32 * d]) : 0.0f;
          }
        } else {
          const int64_t other = group[t - n_cached];
          const float* key = p.pred_k + other * kv_dim + kv_off;
          const float* value = p.pred_v + other * kv_dim + kv_off;
#pragma unroll
          for (int d = 0; d < kDims; ++d) {
            k[g][d] = lane + 32 * d < hd ? key[lane + 32 * d] : 0.0f;
            v[g][d] = lane + 32 * d < hd ? value[lane + 32 * d] : 0.0f;
          }
        }
      }
      float s[kGroup];
#pragma unroll
      for (int g = 0; g < kGroup; ++g) {
        s[g] = 0.0f;
#pragma unroll
        for (int d = 0; d < kDims; ++d) s[g] += q[d] * k[g][d];
      }
#pragma unroll
      for (int offset = 16; offset > 0; offset /= 2) {
#pragma unroll
        for (int g = 0; g < kGroup; ++g) s[g] += __shfl_xor_sync(0xffffffffu, s[g], offset);
      }
      float m_new = m;
#pragma unroll
      for (int g = 0; g < kGroup; ++g) {
        s[g] = t0 + g < stop ? s[g] * p.scale : -INFINITY;
        m_new = fmaxf(m_new, s[g]);
      }
      const float correction = expf(m - m_new);  // exp(-inf) = 0 on a warp's first positions
      l *= correction;
#pragma unroll
      for (int d = 0; d < kDims; ++d) acc[d] *= correction;
#pragma unroll
      for (int g = 0; g < kGroup; ++g) {
        const float weight = expf(s[g] - m_new);  // 0 past `stop`
        l += weight;
#pragma unroll
        for (int d = 0; d < kDims; ++d) acc[d] += weight * v[g][d];
      }
      m = m_new;
    }
  }
  if (!split) {
    if (!active) return;
    // n >= 1 always (a row attends itself), so l > 0 here.
    float* out = p.out + r * p.out_stride + static_cast<int64_t>(h) * hd;
#pragma unroll
    for (int d = 0; d < kDims; ++d) {
      const int dim = lane + 32 * d;
      if (dim >= hd) continue;
      const float o = acc[d] / l;
      out[dim] = o;
      if (p.out_bf16 != nullptr) p.out_bf16[r * p.out_stride + static_cast<int64_t>(h) * hd + dim] = __float2bfloat16_rn(o);
    }
    return;
  }
  // Every (row, head, split) is written, an empty split as (-inf, 0), which the merge skips.
  if (active) {
    const int64_t part = (static_cast<int64_t>(r) * p.num_heads + h) * kAttentionSplits + blockIdx.z;
#pragma unroll
    for (int d = 0; d < kDims; ++d) {
      if (lane + 32 * d < hd) p.partial_acc[part * hd + lane + 32 * d] = acc[d];
    }
    if (lane == 0) {
      p.partial_ml[2 * part] = m;
      p.partial_ml[2 * part + 1] = l;
    }
  }
  // One-row tiles (AR decode): the last of the (tile, head group)'s splits to finish
  // merges them (a separate merge kernel costs a launch a layer). The counter returns to
  // 0 for the next forward (and the next replay of a captured one). Multi-row tiles
  // leave the merge to MergeSplitsKernel: there the waiting blocks' fences and the
  // merging block's serial work cost more than the launch (`scripts/gpu_lease.sh
  // profile` times both). Both call MergeSplits, so a row's bits do not depend on which.
  if (!p.merge_in_kernel) return;
  __shared__ bool last;
  __threadfence();
  __syncthreads();
  int32_t* counter = p.split_counters + static_cast<int64_t>(tile) * gridDim.y + blockIdx.y;
  if (threadIdx.x == 0) last = atomicAdd(counter, 1) == static_cast<int>(gridDim.z) - 1;
  __syncthreads();
  if (!last) return;
  __threadfence();
  if (threadIdx.x == 0) *counter = 0;
  if (!active) return;
  __shared__ float factors[kTileRows * kHeads][kAttentionSplits];
  MergeSplits(p, r, h, lane, factors[warp]);
}

// One warp per (row, head): the merge of forwards with multi-row tiles.
__global__ void MergeSplitsKernel(PagedAttentionParams p) {
  __shared__ float factors[kAttentionSplits];
  MergeSplits(p, blockIdx.x, blockIdx.y, threadIdx.x, factors);
}

template <int kHeads, int kTileRows, typename KvT>
cudaError_t LaunchWithCache(const PagedAttentionParams& p, dim3 grid, cudaStream_t stream) {
  constexpr int kThreads = kTileRows * kHeads * 32;
  if (p.head_dim <= 32) {
    PagedAttentionKernel<kHeads, 1, kTileRows, KvT><<<grid, kThreads, 0, stream>>>(p);
  } else if (p.head_dim <= 64) {
    PagedAttentionKernel<kHeads, 2, kTileRows, KvT><<<grid, kThreads, 0, stream>>>(p);
  } else if (p.head_dim <= 128) {
    PagedAttentionKernel<kHeads, 4, kTileRows, KvT><<<grid, kThreads, 0, stream>>>(p);
  } else {
    PagedAttentionKernel<kHeads, 8, kTileRows, KvT><<<grid, kThreads, 0, stream>>>(p);
  }
  return cudaGetLastError();
}

template <int kHeads, int kTileRows>
cudaError_t LaunchWithTiles(const PagedAttentionParams& p, dim3 grid, cudaStream_t stream) {
  return p.cache_element == KvElement::kBf16 ? LaunchWithCache<kHeads, kTileRows, Bf16>(p, grid, stream)
                                             : LaunchWithCache<kHeads, kTileRows, float>(p, grid, stream);
}

template <int kHeads>
cudaError_t LaunchWithHeads(const PagedAttentionParams& p, dim3 grid, cudaStream_t stream) {
  if (p.max_tile_rows <= 1) return LaunchWithTiles<kHeads, 1>(p, grid, stream);
  if (p.max_tile_rows <= 2) return LaunchWithTiles<kHeads, 2>(p, grid, stream);
  return LaunchWithTiles<kHeads, 4>(p, grid, stream);
}

}  // namespace

AttentionTiles PlanAttentionTiles(const int32_t* table_offset, const int32_t* num_cached, const int32_t* num_own,
                                  int rows, int32_t* tile_first, int32_t* tile_rows, bool split_predictive_apart,
                                  const int32_t* group_begin, int predictive_tile_rows) {
  AttentionTiles plan;
  // Appends row r to the last tile when `joins` says it may, else opens a tile. The
  // predictive pass never joins the control pass's last tile: rows right after a
  // sequence's control rows can share their cached count and group list (an outcome
  // block anchored on the first control row does), but a control tile is launched with
  // the control rows' splits and merged as one.
  auto place = [&](int r, bool predictive_pass) {
    const int t = plan.tiles - 1;
    if (t >= (predictive_pass ? plan.control_tiles : 0) &&
        tile_rows[t] < (predictive_pass ? predictive_tile_rows : kAttentionTileRows)) {
      const int f = tile_first[t];
      const bool joins =
          predictive_pass
              ? table_offset[f] == table_offset[r] && f + tile_rows[t] == r && num_cached[f] == num_cached[r] &&
                    (group_begin == nullptr || group_begin[f] == group_begin[r])
              : table_offset[f] == table_offset[r] && (!split_predictive_apart || f + tile_rows[t] == r) &&
                    AttentionSplitChunk(num_cached[f] + num_own[f]) == AttentionSplitChunk(num_cached[r] + num_own[r]);
      if (joins) {
        ++tile_rows[t];
        return;
      }
    }
    tile_first[plan.tiles] = r;
    tile_rows[plan.tiles] = 1;
    ++plan.tiles;
  };
  if (!split_predictive_apart) {
    for (int r = 0; r < rows; ++r) place(r, false);
  } else {
    for (int r = 0; r < rows; ++r) {
      if (num_own[r] == 0) place(r, false);
    }
    plan.control_tiles = plan.tiles;
    for (int r = 0; r < rows; ++r) {
      if (num_own[r] > 0) place(r, true);
    }
  }
  for (int t = 0; t < plan.tiles; ++t) {
    plan.max_rows = std::max(plan.max_rows, static_cast<int>(tile_rows[t]));
    int& kind = t < plan.control_tiles || !split_predictive_apart ? plan.control_max_rows : plan.predictive_max_rows;
    kind = std::max(kind, static_cast<int>(tile_rows[t]));
  }
  if (!split_predictive_apart) plan.control_tiles = plan.tiles;
  for (int t = plan.tiles; t < rows; ++t) {
    tile_first[t] = -1;
    tile_rows[t] = 0;
  }
  return plan;
}

int PredictiveAttentionSplits(int predictive_tiles, int head_groups, int sm_count) {
  const int per_split = std::max(1, predictive_tiles * head_groups);
  return std::clamp((2 * sm_count + per_split - 1) / per_split, 1, kAttentionSplits);
}

int AttentionHeadsPerBlock(int num_heads, int num_kv_heads) {
  const int group = num_heads / num_kv_heads;
  for (int k : {4, 2}) {
    if (group % k == 0) return k;
  }
  return 1;
}

size_t AttentionPartialFloats(int rows, int num_heads, int head_dim) {
  return static_cast<size_t>(rows) * num_heads * kAttentionSplits * (head_dim + 2);
}

// One launch over tiles [base, base + count) of at most max_rows rows, `splits` ways.
cudaError_t LaunchTiles(PagedAttentionParams p, int base, int count, int max_rows, int splits, bool per_row_chunks,
                        bool merge_in_kernel, cudaStream_t stream) {
  p.tile_base = base;
  p.per_row_chunks = per_row_chunks;
  p.max_tile_rows = max_rows;
  p.launch_splits = splits;
  p.merge_in_kernel = merge_in_kernel;
  const int heads = AttentionHeadsPerBlock(p.num_heads, p.num_kv_heads);
  const dim3 grid(static_cast<unsigned>(count), static_cast<unsigned>(p.num_heads / heads),
                  static_cast<unsigned>(splits));
  return heads == 4   ? LaunchWithHeads<4>(p, grid, stream)
         : heads == 2 ? LaunchWithHeads<2>(p, grid, stream)
                      : LaunchWithHeads<1>(p, grid, stream);
}

std::string DescribeAttentionLaunch(const PagedAttentionParams& p) {
  return "rows " + std::to_string(p.rows) + ", tiles " + std::to_string(p.tiles) + " (at most " +
         std::to_string(p.max_tile_rows) + " rows; control " + std::to_string(p.control_tiles) + " of at most " +
         std::to_string(p.control_max_tile_rows) + ", predictive of at most " +
         std::to_string(p.predictive_max_tile_rows) + "), predictive splits " + std::to_string(p.predictive_splits) +
         (p.predictive_mma ? " on tensor cores" : "") + (p.partial_acc != nullptr ? ", split" : ", unsplit") +
         ", heads " + std::to_string(p.num_heads) + "/" + std::to_string(p.num_kv_heads) + ", head_dim " +
         std::to_string(p.head_dim);
}

cudaError_t LaunchPagedAttention(const PagedAttentionParams& p, cudaStream_t stream) {
  if (p.rows == 0) return cudaSuccess;
  if (p.head_dim > kMaxHeadDim || p.head_dim <= 0 || p.num_kv_heads <= 0 || p.num_heads % p.num_kv_heads != 0 ||
      (p.partial_acc == nullptr) != (p.partial_ml == nullptr) ||
      (p.partial_acc != nullptr && p.split_counters == nullptr) || p.tile_first == nullptr || p.tile_rows == nullptr ||
      p.tiles <= 0 || p.tiles > p.rows || p.max_tile_rows <= 0 || p.predictive_splits < 0 ||
      p.predictive_splits > kAttentionSplits) {
    return cudaErrorInvalidValue;
  }
  const bool split = p.partial_acc != nullptr;
  const bool apart = split && p.predictive_splits > 0 && p.control_tiles < p.tiles;
  // One launch takes SIMT tiles only; apart, predictive tiles may be the tensor-core kernel's.
  if (!apart && p.max_tile_rows > kAttentionTileRows) return cudaErrorInvalidValue;
  if (!apart) {
    // One launch: every tile by the per-row rule (AR and prefill shapes, and forwards
    // without predictive rows).
    PagedAttentionParams one = p;
    one.predictive_splits = 0;
    const int splits = split ? kAttentionSplits : 1;
    if (cudaError_t err = LaunchTiles(one, 0, p.tiles, p.max_tile_rows, splits, true, split && p.max_tile_rows == 1, stream);
        err != cudaSuccess || !split || p.max_tile_rows == 1) {
      return err;
    }
    MergeSplitsKernel<<<dim3(static_cast<unsigned>(p.rows), static_cast<unsigned>(p.num_heads)), 32, 0, stream>>>(one);
    return cudaGetLastError();
  }
  const int predictive_cap = p.predictive_mma ? kMaxPredictiveTileRows : kAttentionTileRows;
  if (p.control_tiles < 0 || p.control_tiles > p.tiles || p.predictive_max_tile_rows <= 0 ||
      p.predictive_max_tile_rows > predictive_cap ||
      (p.control_tiles > 0 && (p.control_max_tile_rows <= 0 || p.control_max_tile_rows > kAttentionTileRows))) {
    return cudaErrorInvalidValue;
  }
  // Control tiles split 32 ways by the per-row rule, as in any other forward (their bits
  // do not depend on the predictive rows beside them); predictive tiles split apart.
  if (p.control_tiles > 0) {
    if (cudaError_t err =
            LaunchTiles(p, 0, p.control_tiles, p.control_max_tile_rows, kAttentionSplits, true, false, stream);
        err != cudaSuccess) {
      return err;
    }
  }
  const cudaError_t err =
      p.predictive_mma
          ? LaunchPredictiveAttentionMma(p, p.control_tiles, p.tiles - p.control_tiles, p.predictive_splits, stream)
          : LaunchTiles(p, p.control_tiles, p.tiles - p.control_tiles, p.predictive_max_tile_rows, p.predictive_splits,
                        false, false, stream);
  if (err != cudaSuccess) return err;
  MergeSplitsKernel<<<dim3(static_cast<unsigned>(p.rows), static_cast<unsigned>(p.num_heads)), 32, 0, stream>>>(p);
  return cudaGetLastError();
}

}  // namespace crossreg::cuda
