// Each CUDA kernel against its CPU reference on fresh random inputs.
// Tolerances: elementwise f32 ops 1e-3 relative (|x| floored at 1: GPU libm and
// summation order differ from the CPU's in the last bits); bf16 GEMM 1e-4 against
// a reference on the same bf16-rounded inputs (only the f32 summation order differs)
// and 1e-2 relative L2 against unrounded f32 inputs (bf16's 8-bit mantissa);
// attention 1e-4 relative (online vs two-pass softmax).
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>
#include <tuple>

#include "engine/cpu/linear.h"
#include "engine/cpu/ops.h"
#include "engine/cuda/gemm.h"
#include "engine/cuda/kernels.h"
#include "engine/cpu/paged_attention.h"
#include "engine/dtype.h"
#include "engine/forward_output.h"
#include "tests/gpu/gpu_test_support.h"

namespace crossreg {
namespace {

using cuda::Bf16;
using testing::MaxRelativeError;
using testing::RandomVector;
using testing::Bf16ToDevice;
using testing::RelativeL2Error;
using testing::ToDevice;
using testing::ToHost;

using CudaKernelTest = testing::CudaContextTest;

std::vector<uint16_t> RoundToBf16(const std::vector<float>& x) {
  std::vector<uint16_t> out(x.size());
  for (size_t i = 0; i < x.size(); ++i) out[i] = F32ToBf16(x[i]);
  return out;
}
std::vector<float> Bf16ToFloat(const std::vector<uint16_t>& x) {
  std::vector<float> out(x.size());
  for (size_t i = 0; i < x.size(); ++i) out[i] = Bf16ToF32(x[i]);
  return out;
}

TEST_F(CudaKernelTest, EmbeddingGatherMatchesCpu) {
  const int vocab = 50, hidden = 72;
  const auto table_bits = RoundToBf16(RandomVector(vocab * hidden, 1));
  const std::vector<int32_t> tokens = {3, 0, 49, 3, 17};
  auto table = Bf16ToDevice(table_bits);
  auto tok = ToDevice(tokens);
  cuda::DeviceBuffer<float> out;
  ASSERT_TRUE(out.Allocate(tokens.size() * hidden).ok());
  ASSERT_EQ(cuda::LaunchEmbeddingGather(table.data(), hidden, tok.data(), 5, out.data(), stream()), cudaSuccess);
  const TensorRef ref_table{DType::kBF16, {vocab, hidden}, table_bits.data()};
  std::vector<float> expected(tokens.size() * hidden);
  for (size_t r = 0; r < tokens.size(); ++r) cpu::EmbeddingRow(ref_table, tokens[r], expected.data() + r * hidden);
  EXPECT_EQ(ToHost(out, expected.size()), expected);  // a conversion: exact
}

TEST_F(CudaKernelTest, RmsNormMatchesCpu) {
  const int rows = 7, n = 333;
  const auto x = RandomVector(rows * n, 2, -3, 3);
  const auto w = RandomVector(n, 3, 0.5f, 1.5f);
  auto dx = ToDevice(x), dw = ToDevice(w);
  cuda::DeviceBuffer<float> out;
  ASSERT_TRUE(out.Allocate(x.size()).ok());
  ASSERT_EQ(cuda::LaunchRmsNorm(dx.data(), dw.data(), rows, n, 1e-5f, out.data(), stream()), cudaSuccess);
  std::vector<float> expected(x.size());
  for (int r = 0; r < rows; ++r) cpu::RmsNorm(x.data() + r * n, w.data(), n, 1e-5f, expected.data() + r * n);
  EXPECT_LT(MaxRelativeError(ToHost(out, x.size()), expected), 1e-3);
}

// The fused cast: the bf16 output is the rounding of the f32 one, for narrow rows and
// for rows wide enough to take 1024 threads.
TEST_F(CudaKernelTest, RmsNormWritesItsBf16RoundingAndHandlesWideRows) {
  for (int n : {333, 4096}) {
    const int rows = 3;
    const auto x = RandomVector(rows * n, 9, -3, 3);
    const auto w = RandomVector(n, 10, 0.5f, 1.5f);
    auto dx = ToDevice(x), dw = ToDevice(w);
    cuda::DeviceBuffer<float> out;
    cuda::DeviceBuffer<Bf16> out_bf16;
    ASSERT_TRUE(out.Allocate(x.size()).ok());
    ASSERT_TRUE(out_bf16.Allocate(x.size()).ok());
    ASSERT_EQ(cuda::LaunchRmsNorm(dx.data(), dw.data(), rows, n, 1e-5f, out.data(), stream(), out_bf16.data()),
              cudaSuccess);
    std::vector<float> expected(x.size());
    for (int r = 0; r < rows; ++r) cpu::RmsNorm(x.data() + r * n, w.data(), n, 1e-5f, expected.data() + r * n);
    const auto got = ToHost(out, x.size());
    EXPECT_LT(MaxRelativeError(got, expected), 1e-3) << n;
    const auto got_bf16 = ToHost(out_bf16, x.size());
    for (size_t i = 0; i < got.size(); ++i) {
      uint16_t bits;
      std::memcpy(&bits, &got_bf16[i], 2);
      ASSERT_EQ(bits, F32ToBf16(got[i])) << n << " at " << i;
    }
  }
}

TEST_F(CudaKernelTest, SwiGluWritesItsBf16Rounding) {
  const int rows = 3, width = 1000;
  const auto gate_up = RandomVector(rows * 2 * width, 11, -6, 6);
  auto d = ToDevice(gate_up);
  cuda::DeviceBuffer<float> out;
  cuda::DeviceBuffer<Bf16> out_bf16;
  ASSERT_TRUE(out.Allocate(rows * width).ok());
  ASSERT_TRUE(out_bf16.Allocate(rows * width).ok());
  ASSERT_EQ(cuda::LaunchSwiGlu(d.data(), rows, width, out.data(), stream(), out_bf16.data()), cudaSuccess);
  const auto got = ToHost(out, rows * width);
  const auto got_bf16 = ToHost(out_bf16, rows * width);
  for (size_t i = 0; i < got.size(); ++i) {
    uint16_t bits;
    std::memcpy(&bits, &got_bf16[i], 2);
    ASSERT_EQ(bits, F32ToBf16(got[i])) << i;
  }
}

TEST_F(CudaKernelTest, RopeMatchesCpuOnStridedRows) {
  const int rows = 5, heads = 3, hd = 16, stride = heads * hd + 10;
  auto x = RandomVector(rows * stride, 4);
  const std::vector<int32_t> positions = {0, 1, 7, 100, 4095};
  ModelConfig c;
  c.head_dim = hd;
  c.rope_theta = 500000.0f;
  const auto inv_freq = c.RopeInverseFrequencies();
  auto dx = ToDevice(x), dfreq = ToDevice(inv_freq);
  auto dpos = ToDevice(positions);
  ASSERT_EQ(cuda::LaunchRope(dx.data(), rows, stride, heads, hd, dpos.data(), dfreq.data(), stream()), cudaSuccess);
  std::vector<float> cos(hd / 2), sin(hd / 2);
  for (int r = 0; r < rows; ++r) {
    for (int i = 0; i < hd / 2; ++i) {
      const float angle = static_cast<float>(positions[r]) * inv_freq[i];
      cos[i] = std::cos(angle);
      sin[i] = std::sin(angle);
    }
    cpu::ApplyRope(x.data() + r * stride, heads, hd, cos.data(), sin.data());
  }
  EXPECT_LT(MaxRelativeError(ToHost(dx, x.size()), x), 1e-3);
}

// The fused launch gives the bits of RoPE over Q and K heads followed by the K/V store.
TEST_F(CudaKernelTest, RopeStoreKvEqualsRopeThenStoreKv) {
  const int rows = 4, heads = 4, kv_heads = 2, hd = 16, kv_dim = kv_heads * hd;
  const int stride = (heads + 2 * kv_heads) * hd + 6;
  const auto qkv = RandomVector(rows * stride, 12);
  const std::vector<int32_t> positions = {3, 4, 5, 9}, slots = {7, 2, -1, -1};
  ModelConfig c;
  c.head_dim = hd;
  const auto inv_freq = c.RopeInverseFrequencies();
  auto dfreq = ToDevice(inv_freq);
  auto dpos = ToDevice(positions), dslots = ToDevice(slots);
  std::vector<float> results[2][5];  // qkv, k cache, v cache, pred k, pred v
  for (int fused = 0; fused < 2; ++fused) {
    auto dqkv = ToDevice(qkv);
    auto kc = ToDevice(std::vector<float>(8 * kv_dim, 0.0f)), vc = ToDevice(std::vector<float>(8 * kv_dim, 0.0f));
    auto pk = ToDevice(std::vector<float>(rows * kv_dim, 0.0f)), pv = ToDevice(std::vector<float>(rows * kv_dim, 0.0f));
    if (fused == 1) {
      ASSERT_EQ(cuda::LaunchRopeStoreKv(dqkv.data(), rows, stride, heads, kv_heads, hd, dpos.data(), dfreq.data(),
                                        dslots.data(), {kc.data(), vc.data()}, pk.data(), pv.data(), stream()),
                cudaSuccess);
    } else {
      ASSERT_EQ(cuda::LaunchRope(dqkv.data(), rows, stride, heads + kv_heads, hd, dpos.data(), dfreq.data(), stream()),
                cudaSuccess);
      ASSERT_EQ(cuda::LaunchStoreKv(dqkv.data(), rows, stride, heads * hd, (heads + kv_heads) * hd, kv_dim,
                                    dslots.data(), {kc.data(), vc.data()}, pk.data(), pv.data(), stream()),
                cudaSuccess);
    }
    results[fused][0] = ToHost(dqkv, qkv.size());
    results[fused][1] = ToHost(kc, 8 * kv_dim);
    results[fused][2] = ToHost(vc, 8 * kv_dim);
    results[fused][3] = ToHost(pk, rows * kv_dim);
    results[fused][4] = ToHost(pv, rows * kv_dim);
  }
  for (int i = 0; i < 5; ++i) EXPECT_EQ(results[1][i], results[0][i]) << "buffer " << i;
}

TEST_F(CudaKernelTest, SwiGluMatchesCpu) {
  const int rows = 4, width = 300;
  const auto gate_up = RandomVector(rows * 2 * width, 5, -6, 6);
  auto d = ToDevice(gate_up);
  cuda::DeviceBuffer<float> out;
  ASSERT_TRUE(out.Allocate(rows * width).ok());
  ASSERT_EQ(cuda::LaunchSwiGlu(d.data(), rows, width, out.data(), stream()), cudaSuccess);
  std::vector<float> expected(rows * width);
  for (int r = 0; r < rows; ++r) {
    std::vector<float> gate(gate_up.begin() + r * 2 * width, gate_up.begin() + r * 2 * width + width);
    cpu::SwiGlu(gate.data(), gate_up.data() + r * 2 * width + width, width);
    std::copy(gate.begin(), gate.end(), expected.begin() + r * width);
  }
  EXPECT_LT(MaxRelativeError(ToHost(out, expected.size()), expected), 1e-3);
}

TEST_F(CudaKernelTest, ResidualAddAndBiasMatchCpu) {
  const int rows = 3, width = 40, stride = 50;
  auto y = RandomVector(rows * stride, 6);
  const auto x = RandomVector(rows * stride, 7);
  const auto bias = RandomVector(width, 8);
  auto dy = ToDevice(y), dx = ToDevice(x), db = ToDevice(bias);
  ASSERT_EQ(cuda::LaunchAddInPlace(dy.data(), dx.data(), rows * stride, stream()), cudaSuccess);
  ASSERT_EQ(cuda::LaunchAddBias(dy.data(), rows, width, stride, db.data(), stream()), cudaSuccess);
  cpu::AddInPlace(y.data(), x.data(), rows * stride);
  for (int r = 0; r < rows; ++r) cpu::AddInPlace(y.data() + r * stride, bias.data(), width);
  EXPECT_LT(MaxRelativeError(ToHost(dy, y.size()), y), 1e-6);
}

TEST_F(CudaKernelTest, CastToBf16RoundsLikeHost) {
  auto x = RandomVector(1000, 9, -100, 100);
  x.push_back(0.0f);
  x.push_back(1e-40f);  // subnormal
  auto dx = ToDevice(x);
  cuda::DeviceBuffer<Bf16> out;
  ASSERT_TRUE(out.Allocate(x.size()).ok());
  ASSERT_EQ(cuda::LaunchCastToBf16(dx.data(), out.data(), static_cast<int64_t>(x.size()), stream()), cudaSuccess);
  std::vector<uint16_t> got(x.size());
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(got.data(), out.data(), got.size() * 2, cudaMemcpyDeviceToHost), cudaSuccess);
  EXPECT_EQ(got, RoundToBf16(x));  // both round to nearest even: bit-exact
}

TEST_F(CudaKernelTest, GatherAndScatterAddRows) {
  const int src_rows = 6, width = 20, stride = 25;
  const auto src = RandomVector(src_rows * stride, 10);
  const std::vector<int32_t> which = {4, 1, 5};
  auto dsrc = ToDevice(src);
  auto dwhich = ToDevice(which);
  cuda::DeviceBuffer<float> gathered;
  ASSERT_TRUE(gathered.Allocate(which.size() * width).ok());
  ASSERT_EQ(cuda::LaunchGatherRows(dsrc.data(), stride, width, dwhich.data(), 3, gathered.data(), stream()),
            cudaSuccess);
  // Scatter the gathered rows back onto the source: those rows double.
  ASSERT_EQ(cuda::LaunchScatterAddRows(gathered.data(), width, dwhich.data(), 3, dsrc.data(), stride, stream()),
            cudaSuccess);
  auto expected = src;
  for (int32_t r : which) {
    for (int i = 0; i < width; ++i) expected[r * stride + i] *= 2;
  }
  EXPECT_EQ(ToHost(dsrc, src.size()), expected);
}

// Row summaries against SummarizeLogitRow, exactly: the argmax (ties to the lowest
// index, NaN and -inf as the sequential scan), and the logits it copies. Rows of the
// 8B model's vocabulary and odd small ones; ties placed across threads and warps.
TEST_F(CudaKernelTest, SummarizeLogitRowsMatchesTheCpuReduction) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  for (int vocab : {128256, 32000, 1031, 7}) {
    SCOPED_TRACE(::testing::Message() << "vocab " << vocab);
    const int rows = 9;
    // Coarse values so that equal maxima are common; then rows with set patterns.
    std::vector<float> z = RandomVector(static_cast<size_t>(rows) * vocab, 20 + vocab, -4.0f, 4.0f);
    for (float& v : z) v = std::round(v * 2.0f) / 2.0f;
    auto row = [&](int r) { return z.data() + static_cast<size_t>(r) * vocab; };
    std::fill(row(1), row(1) + vocab, 1.0f);                        // all equal: index 0
    row(2)[vocab - 1] = 9.0f;                                         // max at the end
    row(2)[vocab / 2] = 9.0f;                                         // ... and a tie before it
    std::fill(row(3), row(3) + vocab, -inf);                         // nothing above -inf: 0
    row(4)[0] = nan;                                                  // NaN at 0: 0
    for (int i = 1; i < vocab; i += 3) row(5)[i] = nan;              // NaNs elsewhere never win
    row(6)[vocab > 40 ? 37 : 3] = inf;
    row(6)[vocab - 1] = inf;                                          // +inf tie: the lower index
    for (int i = 0; i < vocab; i += 1 + vocab / 300) row(7)[i] = 5.0f;  // many tied maxima
    const std::vector<int32_t> which = {8, 0, 1, 2, 3, 4, 5, 6, 7};
    std::vector<int32_t> tokens;
    for (int i = 0; i < rows; ++i) tokens.push_back(i % 3 == 0 ? -1 : (i * 7919) % vocab);
    auto dz = ToDevice(z);
    auto drows = ToDevice(which);
    auto dtokens = ToDevice(tokens);
    cuda::DeviceBuffer<cuda::LogitSummary> out;
    ASSERT_TRUE(out.Allocate(which.size()).ok());
    ASSERT_EQ(cuda::LaunchSummarizeLogitRows(dz.data(), vocab, drows.data(), dtokens.data(),
                                             static_cast<int>(which.size()), out.data(), stream()),
              cudaSuccess);
    const std::vector<cuda::LogitSummary> got = ToHost(out, which.size());
    for (size_t i = 0; i < which.size(); ++i) {
      SCOPED_TRACE(::testing::Message() << "row " << which[i]);
      const RowSummary want = SummarizeLogitRow(row(which[i]), vocab, tokens[i]);
      EXPECT_EQ(got[i].argmax, want.argmax);
      EXPECT_EQ(std::memcmp(&got[i].max_logit, &want.max_logit, sizeof(float)), 0);
      EXPECT_EQ(std::memcmp(&got[i].token_logit, &want.token_logit, sizeof(float)), 0);
    }
  }
}

TEST_F(CudaKernelTest, StoreKvWritesCacheSlotsAndPredictiveScratch) {
  const int rows = 3, kv_dim = 12, width = 8 + 2 * kv_dim, slots_total = 10;
  const auto qkv = RandomVector(rows * width, 11);
  const std::vector<int32_t> slots = {7, -1, 2};  // row 1 is predictive
  auto dqkv = ToDevice(qkv);
  auto dslots = ToDevice(slots);
  auto k = ToDevice(std::vector<float>(slots_total * kv_dim, 0.0f)), v = ToDevice(std::vector<float>(slots_total * kv_dim, 0.0f));
  auto pk = ToDevice(std::vector<float>(rows * kv_dim, 0.0f)), pv = ToDevice(std::vector<float>(rows * kv_dim, 0.0f));
  ASSERT_EQ(cuda::LaunchStoreKv(dqkv.data(), rows, width, 8, 8 + kv_dim, kv_dim, dslots.data(), {k.data(), v.data()},
                                pk.data(), pv.data(), stream()),
            cudaSuccess);
  const auto hk = ToHost(k, slots_total * kv_dim), hv = ToHost(v, slots_total * kv_dim);
  const auto hpk = ToHost(pk, rows * kv_dim), hpv = ToHost(pv, rows * kv_dim);
  for (int r = 0; r < rows; ++r) {
    for (int i = 0; i < kv_dim; ++i) {
      const float ek = qkv[r * width + 8 + i], ev = qkv[r * width + 8 + kv_dim + i];
      if (slots[r] >= 0) {
        EXPECT_EQ(hk[slots[r] * kv_dim + i], ek);
        EXPECT_EQ(hv[slots[r] * kv_dim + i], ev);
      } else {
        EXPECT_EQ(hpk[r * kv_dim + i], ek);
        EXPECT_EQ(hpv[r * kv_dim + i], ev);
      }
    }
  }
}

// Rows 1-4 take the GEMV kernel, 5 and 33 cuBLAS; in = 1000 runs past one round of
// four 16-byte pieces per lane with a ragged end.
TEST_F(CudaKernelTest, GemmBf16MatchesCpuLinear) {
  for (int rows : {1, 2, 3, 4, 5, 33}) {
    const int in = 1000, out = 130, ldy = 140;
    const auto x = RandomVector(rows * in, 12 + rows);
    const auto w = RandomVector(out * in, 13);
    const auto x_bits = RoundToBf16(x), w_bits = RoundToBf16(w);
    auto dx = Bf16ToDevice(x_bits), dw = Bf16ToDevice(w_bits);
    cuda::DeviceBuffer<float> y;
    ASSERT_TRUE(y.Allocate(rows * ldy).ok());
    ASSERT_TRUE(cuda::GemmBf16(*ctx_, dx.data(), rows, in, dw.data(), out, y.data(), ldy).ok());
    const auto got_strided = ToHost(y, rows * ldy);
    std::vector<float> got(rows * out);
    for (int r = 0; r < rows; ++r) std::copy_n(got_strided.begin() + r * ldy, out, got.begin() + r * out);
    // Same bf16 inputs: only the summation order differs.
    const auto xr = Bf16ToFloat(x_bits), wr = Bf16ToFloat(w_bits);
    std::vector<float> same_inputs(rows * out), unrounded(rows * out);
    cpu::LinearReference(TensorRef{DType::kF32, {out, in}, wr.data()}, xr.data(), rows, same_inputs.data());
    cpu::LinearReference(TensorRef{DType::kF32, {out, in}, w.data()}, x.data(), rows, unrounded.data());
    EXPECT_LT(RelativeL2Error(got, same_inputs), 1e-4) << "rows " << rows;
    EXPECT_LT(RelativeL2Error(got, unrounded), 1e-2) << "rows " << rows;
    // beta = 1 adds onto what y holds (the residual stream).
    ASSERT_TRUE(cuda::GemmBf16(*ctx_, dx.data(), rows, in, dw.data(), out, y.data(), ldy, 1.0f).ok());
    const auto twice = ToHost(y, rows * ldy);
    for (int r = 0; r < rows; ++r) {
      for (int o = 0; o < out; ++o) {
        ASSERT_NEAR(twice[r * ldy + o], 2 * got_strided[r * ldy + o], 1e-4 * (1 + std::abs(got_strided[r * ldy + o])))
            << "rows " << rows;
      }
    }
  }
}

// The attention inputs on the host, and their CPU reference (the CPU backend's own
// attention, engine/cpu/paged_attention.h).
struct HostAttention {
  std::vector<float> q;  // (rows, q_stride)
  int64_t q_stride = 0;
  std::vector<float> k_cache, v_cache;  // [slot][kv_dim]
  std::vector<float> pred_k, pred_v;    // [row][kv_dim]
  std::vector<int32_t> block_tables, table_offset, num_cached, num_own, group_begin, group_rows;
  int rows = 0, num_heads = 0, num_kv_heads = 0, head_dim = 0, block_size = 0;
  float scale = 0.0f;

  std::vector<float> Reference() const {
    std::vector<float> out(static_cast<size_t>(rows) * num_heads * head_dim);
    cpu::PagedAttentionArgs a;
    a.q = q.data();
    a.q_stride = q_stride;
    a.k_cache = k_cache.data();
    a.v_cache = v_cache.data();
    a.pred_k = pred_k.data();
    a.pred_v = pred_v.data();
    a.block_tables = block_tables.data();
    a.table_offset = table_offset.data();
    a.num_cached = num_cached.data();
    a.num_own = num_own.data();
    a.group_begin = group_begin.data();
    a.group_rows = group_rows.data();
    a.rows = rows;
    a.num_heads = num_heads;
    a.num_kv_heads = num_kv_heads;
    a.head_dim = head_dim;
    a.block_size = block_size;
    a.scale = scale;
    a.out = out.data();
    a.out_stride = int64_t{num_heads} * head_dim;
    cpu::PagedAttention(a, /*pool=*/nullptr);
    return out;
  }
};

// The device copies of a HostAttention and the kernel's launch on them: the direct
// path (no workspace) or the split path, f32 and bf16 outputs.
struct DeviceAttention {
  cuda::DeviceBuffer<float> q, kc, vc, pk, pv, out, partial;
  cuda::DeviceBuffer<int32_t> bt, to, nc, no, gb, gr, tf, tr, counters;
  cuda::DeviceBuffer<Bf16> out_bf16;
  cuda::PagedAttentionParams p;

  // predictive_splits > 0: predictive rows tiled by group and split that many ways, on
  // the tensor-core kernel with mma.
  explicit DeviceAttention(const HostAttention& in, int predictive_splits = 0, bool mma = false)
      : q(ToDevice(in.q)),
        kc(ToDevice(in.k_cache)),
        vc(ToDevice(in.v_cache)),
        pk(ToDevice(in.pred_k)),
        pv(ToDevice(in.pred_v)),
        bt(ToDevice(in.block_tables)),
        to(ToDevice(in.table_offset)),
        nc(ToDevice(in.num_cached)),
        no(ToDevice(in.num_own)),
        gb(ToDevice(in.group_begin)),
        gr(ToDevice(in.group_rows)) {
    const int qd = in.num_heads * in.head_dim;
    std::vector<int32_t> tile_first(in.rows), tile_rows(in.rows);
    const cuda::AttentionTiles tiles = cuda::PlanAttentionTiles(
        in.table_offset.data(), in.num_cached.data(), in.num_own.data(), in.rows, tile_first.data(), tile_rows.data(),
        predictive_splits > 0, in.group_begin.data(),
        mma ? cuda::PredictiveAttentionMmaTileRows(in.num_heads, in.num_kv_heads) : cuda::kAttentionTileRows);
    if (predictive_splits > 0) {
      p.predictive_splits = predictive_splits;
      p.predictive_mma = mma;
      p.control_tiles = tiles.control_tiles;
      p.control_max_tile_rows = tiles.control_max_rows;
      p.predictive_max_tile_rows = tiles.predictive_max_rows;
    }
    tf = ToDevice(tile_first);
    tr = ToDevice(tile_rows);
    EXPECT_TRUE(out.Allocate(in.rows * qd).ok());
    EXPECT_TRUE(out_bf16.Allocate(in.rows * qd).ok());
    EXPECT_TRUE(partial.Allocate(cuda::AttentionPartialFloats(in.rows, in.num_heads, in.head_dim)).ok());
    counters = ToDevice(std::vector<int32_t>(static_cast<size_t>(in.rows) * in.num_heads, 0));
    p.q = q.data();
    p.q_stride = in.q_stride;
    p.k_cache = kc.data();
    p.v_cache = vc.data();
    p.pred_k = pk.data();
    p.pred_v = pv.data();
    p.block_tables = bt.data();
    p.table_offset = to.data();
    p.num_cached = nc.data();
    p.num_own = no.data();
    p.group_begin = gb.data();
    p.group_rows = gr.data();
    p.tile_first = tf.data();
    p.tile_rows = tr.data();
    p.tiles = tiles.tiles;
    p.max_tile_rows = tiles.max_rows;
    p.out = out.data();
    p.out_bf16 = out_bf16.data();
    p.out_stride = qd;
    p.rows = in.rows;
    p.num_heads = in.num_heads;
    p.num_kv_heads = in.num_kv_heads;
    p.head_dim = in.head_dim;
    p.block_size = in.block_size;
    p.scale = in.scale;
  }
  // Runs the kernel; returns the f32 output and checks the bf16 one is its rounding.
  std::vector<float> Run(bool split, cudaStream_t stream) {
    p.partial_acc = split ? partial.data() : nullptr;
    p.partial_ml = split ? partial.data() + out.size() * cuda::kAttentionSplits : nullptr;
    p.split_counters = split ? counters.data() : nullptr;
    EXPECT_EQ(cuda::LaunchPagedAttention(p, stream), cudaSuccess);
    std::vector<float> result = ToHost(out, out.size());
    std::vector<Bf16> rounded = ToHost(out_bf16, out.size());
    for (size_t i = 0; i < result.size(); ++i) {
      uint16_t bits;
      std::memcpy(&bits, &rounded[i], 2);
      if (bits != F32ToBf16(result[i])) {
        ADD_FAILURE() << "bf16 output " << i << " is not the rounding of the f32 output";
        break;
      }
    }
    return result;
  }
};

// One sequence with a long cached context over shuffled blocks of 16: three control
// rows at its end and a predictive group of four over the first 650 positions.
HostAttention LongContextAttention(int num_heads, int num_kv_heads, int head_dim, int cached) {
  HostAttention in;
  in.num_heads = num_heads;
  in.num_kv_heads = num_kv_heads;
  in.head_dim = head_dim;
  in.block_size = 16;
  in.scale = 1.0f / std::sqrt(static_cast<float>(head_dim));
  const int kv_dim = num_kv_heads * head_dim;
  const int blocks = (cached + 15) / 16 + 1;
  for (int b = 0; b < blocks; ++b) in.block_tables.push_back((b * 7 + 3) % blocks);
  in.rows = 7;
  in.table_offset.assign(7, 0);
  in.num_cached = {cached - 2, cached - 1, cached, 650, 650, 650, 650};
  in.num_own = {0, 0, 0, 1, 2, 3, 4};
  in.group_begin.assign(7, 0);
  in.group_rows = {3, 4, 5, 6};
  in.q_stride = num_heads * head_dim;
  in.q = RandomVector(in.rows * in.q_stride, 31 + head_dim, -2, 2);
  in.k_cache = RandomVector(blocks * 16 * kv_dim, 32, -2, 2);
  in.v_cache = RandomVector(blocks * 16 * kv_dim, 33);
  in.pred_k = RandomVector(in.rows * kv_dim, 34, -2, 2);
  in.pred_v = RandomVector(in.rows * kv_dim, 35);
  return in;
}

// Tiles: consecutive rows of one sequence with the same split chunk, at most 4.
TEST(AttentionTilesTest, GroupConsecutiveRowsOfOneSequenceWithOneChunk) {
  // Rows 0-9 one sequence at n 500..509 (chunk 16 up to 512), row 10 at n 513 (chunk
  // 32), rows 11-12 another sequence, row 13 the first sequence again.
  std::vector<int32_t> offset, cached, own;
  for (int r = 0; r < 10; ++r) {
    offset.push_back(0);
    cached.push_back(500 + r);
    own.push_back(0);
  }
  offset.insert(offset.end(), {0, 7, 7, 0});
  cached.insert(cached.end(), {510, 3, 3, 505});
  own.insert(own.end(), {3, 0, 2, 0});
  const int rows = static_cast<int>(offset.size());
  std::vector<int32_t> first(rows), count(rows);
  const cuda::AttentionTiles tiles =
      cuda::PlanAttentionTiles(offset.data(), cached.data(), own.data(), rows, first.data(), count.data());
  EXPECT_EQ(tiles.tiles, 6);
  EXPECT_EQ(tiles.max_rows, 4);
  EXPECT_EQ(std::vector<int32_t>(first.begin(), first.begin() + 7), (std::vector<int32_t>{0, 4, 8, 10, 11, 13, -1}));
  EXPECT_EQ(std::vector<int32_t>(count.begin(), count.begin() + 7), (std::vector<int32_t>{4, 4, 2, 1, 2, 1, 0}));
  EXPECT_EQ(cuda::AttentionSplitChunk(1), 16);
  EXPECT_EQ(cuda::AttentionSplitChunk(512), 16);
  EXPECT_EQ(cuda::AttentionSplitChunk(513), 32);
  EXPECT_EQ(cuda::AttentionSplitChunk(8192), 256);
}

// Split and direct paths against the reference over hundreds of positions, for GQA
// groups served 4, 2 or 1 heads per block.
// Apart: control rows first, tiled as before but only with consecutive rows; predictive
// rows by sequence whatever their chunks; splits sized to about two blocks per SM.
TEST(AttentionTilesTest, PredictiveRowsTileApartBySequence) {
  // Sequence A: control rows 0-2 (n 510..512), predictive rows 3-8 (n 510 + 1..6, chunks
  // 16 and 32); sequence B: control row 9, predictive rows 10-11; a control row 12 of A.
  const std::vector<int32_t> offset = {0, 0, 0, 0, 0, 0, 0, 0, 0, 5, 5, 5, 0};
  const std::vector<int32_t> cached = {508, 509, 510, 510, 510, 510, 510, 510, 510, 40, 40, 40, 511};
  const std::vector<int32_t> own = {0, 0, 0, 1, 2, 3, 4, 5, 6, 0, 1, 2, 0};
  const int rows = static_cast<int>(offset.size());
  std::vector<int32_t> first(rows), count(rows);
  const cuda::AttentionTiles tiles =
      cuda::PlanAttentionTiles(offset.data(), cached.data(), own.data(), rows, first.data(), count.data(), true);
  EXPECT_EQ(tiles.control_tiles, 3);  // {0,1,2}, {9}, {12}: not contiguous with 0-2
  EXPECT_EQ(tiles.tiles, 6);          // + {3,4,5,6}, {7,8}, {10,11}
  EXPECT_EQ(std::vector<int32_t>(first.begin(), first.begin() + 7), (std::vector<int32_t>{0, 9, 12, 3, 7, 10, -1}));
  EXPECT_EQ(std::vector<int32_t>(count.begin(), count.begin() + 7), (std::vector<int32_t>{3, 1, 1, 4, 2, 2, 0}));
  EXPECT_EQ(tiles.control_max_rows, 3);
  EXPECT_EQ(tiles.predictive_max_rows, 4);
  // An outcome block right after its sequence's control rows, anchored on the first one:
  // the same cached count and group list as the control tile, still a tile of its own.
  const std::vector<int32_t> block_offset = {0, 0, 0, 0, 0, 0};
  const std::vector<int32_t> block_cached = {21, 22, 23, 21, 21, 21};
  const std::vector<int32_t> block_own = {0, 0, 0, 3, 3, 3};
  const std::vector<int32_t> block_group = {0, 0, 0, 0, 0, 0};
  std::vector<int32_t> block_first(6), block_count(6);
  const cuda::AttentionTiles block_tiles =
      cuda::PlanAttentionTiles(block_offset.data(), block_cached.data(), block_own.data(), 6, block_first.data(),
                               block_count.data(), true, block_group.data(), cuda::kMaxPredictiveTileRows);
  EXPECT_EQ(block_tiles.control_tiles, 1);
  EXPECT_EQ(block_tiles.tiles, 2);
  EXPECT_EQ(std::vector<int32_t>(block_first.begin(), block_first.begin() + 3), (std::vector<int32_t>{0, 3, -1}));
  EXPECT_EQ(std::vector<int32_t>(block_count.begin(), block_count.begin() + 2), (std::vector<int32_t>{3, 3}));
  EXPECT_EQ(cuda::PredictiveAttentionSplits(8, 8, 132), 5);    // 64 blocks a split: 4.1 -> 5
  EXPECT_EQ(cuda::PredictiveAttentionSplits(64, 8, 132), 1);
  EXPECT_EQ(cuda::PredictiveAttentionSplits(1, 1, 132), 32);
  EXPECT_EQ(cuda::PredictiveAttentionSplits(0, 8, 132), 32);
}

TEST_F(CudaKernelTest, PagedAttentionSplitAndDirectPathsMatchReferenceOnLongContexts) {
  for (auto [heads, kv_heads, head_dim] : {std::tuple{8, 2, 128}, {6, 3, 64}, {6, 2, 32}, {4, 4, 256}}) {
    const HostAttention in = LongContextAttention(heads, kv_heads, head_dim, 700);
    const auto expected = in.Reference();
    DeviceAttention dev(in);
    const std::vector<float> split = dev.Run(/*split=*/true, stream());
    EXPECT_LT(MaxRelativeError(split, expected), 1e-4) << heads << "/" << head_dim;
    // The split counters are back at zero: a second launch merges again, same bits.
    EXPECT_EQ(dev.Run(/*split=*/true, stream()), split) << heads << "/" << head_dim;
    EXPECT_LT(MaxRelativeError(dev.Run(/*split=*/false, stream()), expected), 1e-4) << heads << "/" << head_dim;
  }
}

// A bf16 cache (--kv_dtype bf16) against the CPU reference reading the same bf16 values.
// The CPU reference reading a bf16 cache of these bits.
std::vector<float> Bf16CacheReference(const HostAttention& in, const std::vector<uint16_t>& k_bits,
                                      const std::vector<uint16_t>& v_bits) {
  std::vector<float> expected(static_cast<size_t>(in.rows) * in.num_heads * in.head_dim);
  cpu::PagedAttentionArgs a;
  a.q = in.q.data();
  a.q_stride = in.q_stride;
  a.cache_element = cpu::KvElement::kBf16;
  a.k_cache = k_bits.data();
  a.v_cache = v_bits.data();
  a.pred_k = in.pred_k.data();
  a.pred_v = in.pred_v.data();
  a.block_tables = in.block_tables.data();
  a.table_offset = in.table_offset.data();
  a.num_cached = in.num_cached.data();
  a.num_own = in.num_own.data();
  a.group_begin = in.group_begin.data();
  a.group_rows = in.group_rows.data();
  a.rows = in.rows;
  a.num_heads = in.num_heads;
  a.num_kv_heads = in.num_kv_heads;
  a.head_dim = in.head_dim;
  a.block_size = in.block_size;
  a.scale = in.scale;
  a.out = expected.data();
  a.out_stride = int64_t{in.num_heads} * in.head_dim;
  cpu::PagedAttention(a, /*pool=*/nullptr);
  return expected;
}

TEST_F(CudaKernelTest, PagedAttentionReadsABf16Cache) {
  const HostAttention in = LongContextAttention(8, 2, 128, 700);
  const std::vector<uint16_t> k_bits = RoundToBf16(in.k_cache), v_bits = RoundToBf16(in.v_cache);
  const std::vector<float> expected = Bf16CacheReference(in, k_bits, v_bits);
  DeviceAttention dev(in);
  auto kc = Bf16ToDevice(k_bits), vc = Bf16ToDevice(v_bits);
  dev.p.k_cache = kc.data();
  dev.p.v_cache = vc.data();
  dev.p.cache_element = cuda::KvElement::kBf16;
  EXPECT_LT(MaxRelativeError(dev.Run(/*split=*/true, stream()), expected), 1e-4);
  EXPECT_LT(MaxRelativeError(dev.Run(/*split=*/false, stream()), expected), 1e-4);
}

// On the split path a row's output bits do not depend on the other rows of the launch
// (the lossless == AR identity on the GPU rests on it): the last control row alone
// gives the same bits as inside the 7-row batch.
TEST_F(CudaKernelTest, PagedAttentionSplitPathIsBatchInvariant) {
  const HostAttention batch = LongContextAttention(8, 2, 128, 700);
  DeviceAttention dev_batch(batch);
  const std::vector<float> all = dev_batch.Run(/*split=*/true, stream());
  HostAttention alone = batch;
  const int qd = batch.num_heads * batch.head_dim;
  alone.rows = 1;
  alone.q.assign(batch.q.begin() + 2 * batch.q_stride, batch.q.begin() + 3 * batch.q_stride);
  alone.table_offset = {0};
  alone.num_cached = {batch.num_cached[2]};
  alone.num_own = {0};
  alone.group_begin = {0};
  DeviceAttention dev_alone(alone);
  const std::vector<float> one = dev_alone.Run(/*split=*/true, stream());
  EXPECT_EQ(one, std::vector<float>(all.begin() + 2 * qd, all.begin() + 3 * qd));
}

// Predictive rows split apart (their own tiles, S splits of even chunks, a launch of
// their own) match the reference, and the control rows beside them keep the bits of the
// per-row rule.
TEST_F(CudaKernelTest, PagedAttentionSplitsPredictiveRowsApart) {
  for (auto [heads, kv_heads, head_dim] : {std::tuple{8, 2, 128}, {6, 3, 64}}) {
    const HostAttention in = LongContextAttention(heads, kv_heads, head_dim, 700);
    const auto expected = in.Reference();
    DeviceAttention legacy(in);
    const std::vector<float> per_row = legacy.Run(/*split=*/true, stream());
    const int qd = heads * head_dim;
    for (int splits : {1, 3, 8, 32}) {
      SCOPED_TRACE(::testing::Message() << "heads " << heads << " splits " << splits);
      DeviceAttention apart(in, splits);
      const std::vector<float> got = apart.Run(/*split=*/true, stream());
      EXPECT_LT(MaxRelativeError(got, expected), 1e-4);
      EXPECT_EQ(std::vector<float>(got.begin(), got.begin() + 3 * qd),
                std::vector<float>(per_row.begin(), per_row.begin() + 3 * qd));
      // Run twice: the in-place state (split counters) is left as found.
      EXPECT_EQ(apart.Run(/*split=*/true, stream()), got);
    }
  }
}

// The tensor-core kernel for predictive rows: bf16 products, so within bf16's precision
// of the f32 reference (scores of |q·k| up to ~50 here); control rows untouched.
TEST_F(CudaKernelTest, PredictiveAttentionOnTensorCoresMatchesReference) {
  for (auto [heads, kv_heads, head_dim] : {std::tuple{8, 2, 128}, {6, 3, 64}, {4, 4, 64}, {8, 1, 128}}) {
    for (bool bf16_cache : {false, true}) {
      const HostAttention in = LongContextAttention(heads, kv_heads, head_dim, 700);
      SCOPED_TRACE(::testing::Message() << "heads " << heads << "/" << kv_heads << " head_dim " << head_dim
                                        << (bf16_cache ? " bf16 cache" : " f32 cache"));
      const std::vector<uint16_t> k_bits = RoundToBf16(in.k_cache), v_bits = RoundToBf16(in.v_cache);
      auto kc = Bf16ToDevice(k_bits), vc = Bf16ToDevice(v_bits);
      auto use_cache = [&](DeviceAttention& d) {
        if (!bf16_cache) return;
        d.p.k_cache = kc.data();
        d.p.v_cache = vc.data();
        d.p.cache_element = cuda::KvElement::kBf16;
      };
      DeviceAttention legacy(in);
      use_cache(legacy);
      const std::vector<float> per_row = legacy.Run(/*split=*/true, stream());
      const std::vector<float> expected = bf16_cache ? Bf16CacheReference(in, k_bits, v_bits) : in.Reference();
      const int qd = heads * head_dim;
      for (int splits : {1, 5, 32}) {
        SCOPED_TRACE(::testing::Message() << splits << " splits");
        DeviceAttention mma(in, splits, /*mma=*/true);
        use_cache(mma);
        const std::vector<float> got = mma.Run(/*split=*/true, stream());
        // A masking or staging bug moves outputs by ~0.1-1 (values are averages of V in ±1).
        EXPECT_LT(MaxRelativeError(got, expected), 5e-2);
        EXPECT_LT(RelativeL2Error(got, expected, 3 * qd), 3e-2);
        EXPECT_EQ(std::vector<float>(got.begin(), got.begin() + 3 * qd),
                  std::vector<float>(per_row.begin(), per_row.begin() + 3 * qd));
      }
    }
  }
}

// The predictive rows' LoRA update for a group of three targets, in place, against
// x·Aᵀ then scale·(·)·Bᵀ on the host; other rows are left untouched.
TEST_F(CudaKernelTest, LoraShrinkAndExpandMatchHostReference) {
  // 9 rows: two shrink tiles, one wide expand tile; 40 rows: five shrink tiles, two wide
  // expand tiles.
  for (int count : {9, 40}) {
  SCOPED_TRACE(::testing::Message() << count << " rows");
  const int total_rows = 48, in = 1500, ldy = 120;  // in: two K splits
  std::vector<int32_t> rows;
  for (int i = 0; i < count; ++i) rows.push_back((i * 7 + 3) % total_rows);  // distinct: 7 and 48 coprime
  const int ranks[3] = {4, 8, 2}, outs[3] = {50, 30, 20}, cols[3] = {0, 50, 90};
  const float scales[3] = {0.5f, 2.0f, 1.0f};
  const auto x = RandomVector(total_rows * in, 40);
  auto y = RandomVector(total_rows * ldy, 41);
  std::vector<std::vector<float>> a(3), b(3);
  std::vector<cuda::DeviceBuffer<float>> da, db;
  cuda::LoraGroup g;
  g.targets = 3;
  for (int t = 0; t < 3; ++t) {
    a[t] = RandomVector(ranks[t] * in, 42 + t);
    b[t] = RandomVector(outs[t] * ranks[t], 45 + t);
    da.push_back(ToDevice(a[t]));
    db.push_back(ToDevice(b[t]));
  }
  for (int t = 0; t < 3; ++t) {
    g.a[t] = da[t].data();
    g.b[t] = db[t].data();
    g.rank[t] = ranks[t];
    g.out[t] = outs[t];
    g.col[t] = cols[t];
    g.scale[t] = scales[t];
  }
  auto dx = ToDevice(x), dy = ToDevice(y);
  auto drows = ToDevice(rows);
  cuda::DeviceBuffer<float> mid;
  ASSERT_TRUE(mid.Allocate(cuda::LoraShrinkSplits(in) * rows.size() * g.total_rank()).ok());
  ASSERT_EQ(cuda::LaunchLoraShrink(g, dx.data(), in, in, drows.data(), static_cast<int>(rows.size()), mid.data(),
                                   stream()),
            cudaSuccess);
  ASSERT_EQ(cuda::LaunchLoraExpand(g, mid.data(), in, drows.data(), static_cast<int>(rows.size()), dy.data(), ldy,
                                   stream()),
            cudaSuccess);
  for (int r : rows) {
    for (int t = 0; t < 3; ++t) {
      std::vector<double> m(ranks[t], 0.0);
      for (int j = 0; j < ranks[t]; ++j)
        for (int k = 0; k < in; ++k) m[j] += double(x[r * in + k]) * a[t][j * in + k];
      for (int c = 0; c < outs[t]; ++c) {
        double sum = 0;
        for (int j = 0; j < ranks[t]; ++j) sum += m[j] * b[t][c * ranks[t] + j];
        y[r * ldy + cols[t] + c] += static_cast<float>(scales[t] * sum);
      }
    }
  }
  EXPECT_LT(MaxRelativeError(ToHost(dy, y.size()), y), 1e-4);
  }
}

// Two sequences over shuffled blocks: control rows (one a multi-row prefill chunk)
// and a predictive group that attends a cached prefix plus its own rows.
TEST_F(CudaKernelTest, PagedAttentionMatchesReferenceOnRaggedRows) {
  for (int head_dim : {8, 64, 128, 256}) {
    HostAttention in;
    in.num_heads = 8;
    in.num_kv_heads = 2;
    in.head_dim = head_dim;
    in.block_size = 4;
    in.scale = 1.0f / std::sqrt(static_cast<float>(head_dim));
    const int kv_dim = in.num_kv_heads * head_dim, num_blocks = 16;
    in.block_tables = {9, 2, 14, 5, 0, 11, 3, 7, 12};  // seq A: blocks 0..4, seq B: 5..8
    // Rows: A control at positions 15, 16, 17 (prefill chunk); B control at 9;
    // B predictive rows at P0 = 6, 7, 8.
    in.rows = 7;
    in.table_offset = {0, 0, 0, 5, 5, 5, 5};
    in.num_cached = {16, 17, 18, 10, 6, 6, 6};
    in.num_own = {0, 0, 0, 0, 1, 2, 3};
    in.group_begin = {0, 0, 0, 0, 0, 0, 0};
    in.group_rows = {4, 5, 6};
    in.q_stride = in.num_heads * head_dim + 3;
    in.q = RandomVector(in.rows * in.q_stride, 16 + head_dim, -2, 2);
    in.k_cache = RandomVector(num_blocks * in.block_size * kv_dim, 17, -2, 2);
    in.v_cache = RandomVector(num_blocks * in.block_size * kv_dim, 18);
    in.pred_k = RandomVector(in.rows * kv_dim, 19, -2, 2);
    in.pred_v = RandomVector(in.rows * kv_dim, 20);
    const auto expected = in.Reference();

    DeviceAttention dev(in);
    EXPECT_LT(MaxRelativeError(dev.Run(/*split=*/false, stream()), expected), 1e-4) << "head_dim " << head_dim;
    EXPECT_LT(MaxRelativeError(dev.Run(/*split=*/true, stream()), expected), 1e-4) << "head_dim " << head_dim;
  }
}

}  // namespace
}  // namespace crossreg
