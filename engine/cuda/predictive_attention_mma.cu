// The predictive rows' attention on tensor cores. A Cross-Regression step's γ predictive
// rows of one sequence attend the same cached prefix and, causally, each other: one block
// takes up to 16 of them for the query heads of one KV head (64 query vectors at GQA 4),
// scores 64 positions at a time as one (64 × head_dim) · (head_dim × 64) bf16 product,
// and accumulates P · V the same way, with an online softmax in f32 in between. The SIMT
// kernel (paged_attention.cu) spends a warp per (row, head) and reduces each score across
// lanes; here a position's keys and values are read once per block for every row and
// head, and the dot products run as mma.
//
// Rows of a tile share their cached prefix and their predictive group (the planner's
// rule), so position t of the tile is the cache's t below num_cached and the group's
// (t - num_cached)-th row above it; row r sees positions below num_cached + num_own[r].
// Q, K, V and P are rounded to bf16 for the products (these rows draft, they never
// decide a verdict; control rows keep the exact SIMT kernel). Results leave as split
// partials (m, l, Σ p·v) that MergeSplitsKernel combines.
#include <cuda_runtime.h>
#include <mma.h>

#include <cmath>

#include "engine/cuda/kernels.h"

namespace crossreg::cuda {
namespace {

using namespace nvcuda;  // NOLINT: wmma's fragments

constexpr int kM = 64;        // query vectors a block holds (rows × heads)
constexpr int kN = 64;        // positions scored at a time
constexpr int kWarps = kM / 16;
constexpr int kThreads = kWarps * 32;

template <int kHd>
struct Layout {
  static constexpr int kQkLd = kHd + 8;  // bf16 rows, padded against bank conflicts
  static constexpr int kSLd = kN + 4;    // f32 scores
  static constexpr int kPLd = kN + 8;    // bf16 probabilities
  static constexpr int kOLd = kHd + 4;   // f32 accumulators
  static constexpr size_t kQ = 0;
  static constexpr size_t kK = kQ + sizeof(Bf16) * kM * kQkLd;
  static constexpr size_t kV = kK + sizeof(Bf16) * kN * kQkLd;
  static constexpr size_t kS = kV + sizeof(Bf16) * kN * kQkLd;
  static constexpr size_t kP = kS + sizeof(float) * kM * kSLd;
  static constexpr size_t kO = kP + sizeof(Bf16) * kM * kPLd;
  static constexpr size_t kStats = kO + sizeof(float) * kM * kOLd;  // m, l, correction, limit
  static constexpr size_t kBytes = kStats + sizeof(float) * 4 * kM;
};

__device__ __forceinline__ float4 LoadFour(const float* p) { return *reinterpret_cast<const float4*>(p); }
__device__ __forceinline__ float4 LoadFour(const Bf16* p) {
  const uint2 bits = *reinterpret_cast<const uint2*>(p);
  return make_float4(__uint_as_float(bits.x << 16), __uint_as_float(bits.x & 0xffff0000u),
                     __uint_as_float(bits.y << 16), __uint_as_float(bits.y & 0xffff0000u));
}
__device__ __forceinline__ void StoreFour(Bf16* dst, float4 v) {
  reinterpret_cast<__nv_bfloat162*>(dst)[0] = __floats2bfloat162_rn(v.x, v.y);
  reinterpret_cast<__nv_bfloat162*>(dst)[1] = __floats2bfloat162_rn(v.z, v.w);
}

template <int kHd, int kHeads, typename KvT>
__global__ void __launch_bounds__(kThreads) PredictiveAttentionMmaKernel(PagedAttentionParams p) {
  using L = Layout<kHd>;
  constexpr int kTileRows = kM / kHeads;
  extern __shared__ __align__(128) unsigned char smem[];
  Bf16* qs = reinterpret_cast<Bf16*>(smem + L::kQ);
  Bf16* ks = reinterpret_cast<Bf16*>(smem + L::kK);
  Bf16* vs = reinterpret_cast<Bf16*>(smem + L::kV);
  float* ss = reinterpret_cast<float*>(smem + L::kS);
  Bf16* ps = reinterpret_cast<Bf16*>(smem + L::kP);
  float* os = reinterpret_cast<float*>(smem + L::kO);
  float* ms = reinterpret_cast<float*>(smem + L::kStats);
  float* ls = ms + kM;
  float* cs = ls + kM;
  int* limit = reinterpret_cast<int*>(cs + kM);

  const KvT* k_cache = static_cast<const KvT*>(p.k_cache);
  const KvT* v_cache = static_cast<const KvT*>(p.v_cache);
  const int tile = p.tile_base + blockIdx.x;
  const int first = p.tile_first[tile];
  if (first < 0) return;
  const int rows = min(p.tile_rows[tile], kTileRows);
  const int h0 = blockIdx.y * kHeads;
  const int kv_dim = p.num_kv_heads * kHd;
  const int64_t kv_off = static_cast<int64_t>(h0 / (p.num_heads / p.num_kv_heads)) * kHd;
  const int n_cached = p.num_cached[first];
  const int32_t* table = p.block_tables + p.table_offset[first];
  const int32_t* group = p.group_rows + p.group_begin[first];
  int max_own = 0;
  for (int i = 0; i < rows; ++i) max_own = max(max_own, p.num_own[first + i]);
  const int tile_n = n_cached + max_own;
  const int chunk = ((tile_n + static_cast<int>(gridDim.z) - 1) / static_cast<int>(gridDim.z) + 15) / 16 * 16;
  const int begin = blockIdx.z * chunk;
  const int end = min(tile_n, begin + chunk);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;

  // Query vector v = row · kHeads + head; vectors past the tile's rows are zero and see nothing.
  for (int e = threadIdx.x; e < kM * (kHd / 4); e += kThreads) {
    const int v = e / (kHd / 4), d = 4 * (e % (kHd / 4));
    float4 q = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    if (v < rows * kHeads) {
      const int r = first + v / kHeads, h = h0 + v % kHeads;
      q = LoadFour(p.q + r * p.q_stride + static_cast<int64_t>(h) * kHd + d);
    }
    StoreFour(qs + v * L::kQkLd + d, q);
  }
  for (int e = threadIdx.x; e < kM * kHd; e += kThreads) os[(e / kHd) * L::kOLd + e % kHd] = 0.0f;
  for (int v = threadIdx.x; v < kM; v += kThreads) {
    ms[v] = -INFINITY;
    ls[v] = 0.0f;
    limit[v] = v < rows * kHeads ? n_cached + p.num_own[first + v / kHeads] : 0;
  }

  for (int base = begin; base < end; base += kN) {
    __syncthreads();  // the previous positions are consumed (and the set-up is done)
    for (int e = threadIdx.x; e < kN * (kHd / 4); e += kThreads) {
      const int j = e / (kHd / 4), d = 4 * (e % (kHd / 4));
      const int t = base + j;
      float4 k = make_float4(0.0f, 0.0f, 0.0f, 0.0f), v = k;
      if (t < end) {
        if (t < n_cached) {
          const int64_t slot = static_cast<int64_t>(table[t / p.block_size]) * p.block_size + t % p.block_size;
          k = LoadFour(k_cache + slot * kv_dim + kv_off + d);
          v = LoadFour(v_cache + slot * kv_dim + kv_off + d);
        } else {
          const int64_t other = group[t - n_cached];
          k = LoadFour(p.pred_k + other * kv_dim + kv_off + d);
          v = LoadFour(p.pred_v + other * kv_dim + kv_off + d);
        }
      }
      StoreFour(ks + j * L::kQkLd + d, k);
      StoreFour(vs + j * L::kQkLd + d, v);
    }
    __syncthreads();

    // Scores of the warp's 16 query vectors against the 64 positions.
    {
      wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc[kN / 16];
#pragma unroll
      for (int nt = 0; nt < kN / 16; ++nt) wmma::fill_fragment(acc[nt], 0.0f);
#pragma unroll
      for (int kk = 0; kk < kHd / 16; ++kk) {
        wmma::fragment<wmma::matrix_a, 16, 16, 16, Bf16, wmma::row_major> a;
        wmma::load_matrix_sync(a, qs + (16 * warp) * L::kQkLd + 16 * kk, L::kQkLd);
#pragma unroll
        for (int nt = 0; nt < kN / 16; ++nt) {
          wmma::fragment<wmma::matrix_b, 16, 16, 16, Bf16, wmma::col_major> b;  // Kᵀ: K's rows are its columns
          wmma::load_matrix_sync(b, ks + (16 * nt) * L::kQkLd + 16 * kk, L::kQkLd);
          wmma::mma_sync(acc[nt], a, b, acc[nt]);
        }
      }
#pragma unroll
      for (int nt = 0; nt < kN / 16; ++nt) {
        wmma::store_matrix_sync(ss + (16 * warp) * L::kSLd + 16 * nt, acc[nt], L::kSLd, wmma::mem_row_major);
      }
    }
    __syncwarp();

    // Online softmax, one query vector at a time, two positions a lane.
    for (int i = 0; i < 16; ++i) {
      const int v = 16 * warp + i;
      float s[2];
      float mx = -INFINITY;
#pragma unroll
      for (int u = 0; u < 2; ++u) {
        const int j = lane + 32 * u;
        const int t = base + j;
        s[u] = t < end && t < limit[v] ? ss[v * L::kSLd + j] * p.scale : -INFINITY;
        mx = fmaxf(mx, s[u]);
      }
      for (int offset = 16; offset > 0; offset /= 2) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, offset));
      const float m_old = ms[v];
      const float m_new = fmaxf(m_old, mx);
      float sum = 0.0f;
#pragma unroll
      for (int u = 0; u < 2; ++u) {
        const Bf16 pb = __float2bfloat16_rn(m_new == -INFINITY ? 0.0f : expf(s[u] - m_new));
        ps[v * L::kPLd + lane + 32 * u] = pb;
        sum += __bfloat162float(pb);  // l sums the weights P · V uses
      }
      for (int offset = 16; offset > 0; offset /= 2) sum += __shfl_xor_sync(0xffffffffu, sum, offset);
      if (lane == 0) {
        const float correction = m_new == -INFINITY ? 1.0f : expf(m_old - m_new);  // exp(-inf) = 0 at first
        ms[v] = m_new;
        ls[v] = ls[v] * correction + sum;
        cs[v] = correction;
      }
    }
    __syncwarp();
    for (int e = lane; e < 16 * kHd; e += 32) {
      const int v = 16 * warp + e / kHd;
      os[v * L::kOLd + e % kHd] *= cs[v];
    }
    __syncwarp();

    // O += P · V for the warp's 16 query vectors.
#pragma unroll
    for (int nt = 0; nt < kHd / 16; ++nt) {
      wmma::fragment<wmma::accumulator, 16, 16, 16, float> o;
      wmma::load_matrix_sync(o, os + (16 * warp) * L::kOLd + 16 * nt, L::kOLd, wmma::mem_row_major);
#pragma unroll
      for (int kk = 0; kk < kN / 16; ++kk) {
        wmma::fragment<wmma::matrix_a, 16, 16, 16, Bf16, wmma::row_major> a;
        wmma::fragment<wmma::matrix_b, 16, 16, 16, Bf16, wmma::row_major> b;
        wmma::load_matrix_sync(a, ps + (16 * warp) * L::kPLd + 16 * kk, L::kPLd);
        wmma::load_matrix_sync(b, vs + (16 * kk) * L::kQkLd + 16 * nt, L::kQkLd);
        wmma::mma_sync(o, a, b, o);
      }
      wmma::store_matrix_sync(os + (16 * warp) * L::kOLd + 16 * nt, o, L::kOLd, wmma::mem_row_major);
    }
  }
  __syncthreads();

  // Every (row, head) of the tile leaves this split's partial, an empty split as (-inf, 0).
  for (int e = threadIdx.x; e < rows * kHeads * kHd; e += kThreads) {
    const int v = e / kHd, d = e % kHd;
    const int r = first + v / kHeads, h = h0 + v % kHeads;
    const int64_t part = (static_cast<int64_t>(r) * p.num_heads + h) * kAttentionSplits + blockIdx.z;
    p.partial_acc[part * kHd + d] = os[v * L::kOLd + d];
    if (d == 0) {
      p.partial_ml[2 * part] = ms[v];
      p.partial_ml[2 * part + 1] = ls[v];
    }
  }
}

template <int kHd, int kHeads, typename KvT>
cudaError_t LaunchMma(const PagedAttentionParams& p, dim3 grid, cudaStream_t stream) {
  constexpr size_t bytes = Layout<kHd>::kBytes;
  // Above the 48 KB default: opted in once per instantiation, before any graph capture
  // (a forward's first sighting of a shape runs eagerly).
  static const cudaError_t opted = cudaFuncSetAttribute(PredictiveAttentionMmaKernel<kHd, kHeads, KvT>,
                                                        cudaFuncAttributeMaxDynamicSharedMemorySize,
                                                        static_cast<int>(bytes));
  if (opted != cudaSuccess) return opted;
  PredictiveAttentionMmaKernel<kHd, kHeads, KvT><<<grid, kThreads, bytes, stream>>>(p);
  return cudaGetLastError();
}

template <int kHd, int kHeads>
cudaError_t LaunchMmaWithCache(const PagedAttentionParams& p, dim3 grid, cudaStream_t stream) {
  return p.cache_element == KvElement::kBf16 ? LaunchMma<kHd, kHeads, Bf16>(p, grid, stream)
                                             : LaunchMma<kHd, kHeads, float>(p, grid, stream);
}

template <int kHd>
cudaError_t LaunchMmaWithHeads(const PagedAttentionParams& p, dim3 grid, cudaStream_t stream) {
  const int heads = AttentionHeadsPerBlock(p.num_heads, p.num_kv_heads);
  return heads == 4   ? LaunchMmaWithCache<kHd, 4>(p, grid, stream)
         : heads == 2 ? LaunchMmaWithCache<kHd, 2>(p, grid, stream)
                      : LaunchMmaWithCache<kHd, 1>(p, grid, stream);
}

}  // namespace

bool PredictiveAttentionMmaSupported(int head_dim) { return head_dim == 64 || head_dim == 128; }

int PredictiveAttentionMmaTileRows(int num_heads, int num_kv_heads) {
  return kM / AttentionHeadsPerBlock(num_heads, num_kv_heads) < kMaxPredictiveTileRows
             ? kM / AttentionHeadsPerBlock(num_heads, num_kv_heads)
             : kMaxPredictiveTileRows;
}

cudaError_t LaunchPredictiveAttentionMma(const PagedAttentionParams& p, int tile_base, int tiles, int splits,
                                         cudaStream_t stream) {
  if (!PredictiveAttentionMmaSupported(p.head_dim) || p.partial_acc == nullptr || tiles <= 0 || splits <= 0 ||
      splits > kAttentionSplits) {
    return cudaErrorInvalidValue;
  }
  PagedAttentionParams q = p;
  q.tile_base = tile_base;
  const int heads = AttentionHeadsPerBlock(p.num_heads, p.num_kv_heads);
  const dim3 grid(static_cast<unsigned>(tiles), static_cast<unsigned>(p.num_heads / heads),
                  static_cast<unsigned>(splits));
  return p.head_dim == 128 ? LaunchMmaWithHeads<128>(q, grid, stream) : LaunchMmaWithHeads<64>(q, grid, stream);
}

}  // namespace crossreg::cuda
