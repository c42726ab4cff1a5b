#include "engine/cpu/linear.h"

#include <algorithm>
#include <chrono>
#include <vector>

#include "engine/cpu/bf16_panel_kernel.h"
#include "engine/cpu/cpu_features.h"
#include "engine/cpu/linear_kernels.h"
#include "engine/cpu/tile_order_chooser.h"
#include "engine/dtype.h"

namespace crossreg::cpu {
namespace {

using internal::PanelArgs;

// Whether bf16 panels run a widened kernel at this level (their activations then
// travel as pairs of floats): always on AVX2 and AVX-512 F, by measurement with
// AVX512_BF16.
bool WidenedBf16(SimdLevel level) {
  if (level == SimdLevel::kAvx2 || level == SimdLevel::kAvx512) return true;
  return level == SimdLevel::kAvx512Bf16 && Bf16PanelKernelAt(level) == Bf16PanelKernel::kWide;
}

// Whether bf16 panels run on AMX tiles at this level (their activations then travel in
// AMX row tiles: engine/cpu/linear_kernels.h).
bool AmxBf16(SimdLevel level) { return Bf16PanelKernelAt(level) == Bf16PanelKernel::kAmx; }

enum class QuantKernel { kScalar, kAvx2, kAvx512Vnni };

// AVX-512 CPUs without VNNI run the AVX2 kernel: AVX-512 BW alone adds no 8-bit
// multiply that beats vpmaddubsw enough to pay for a third kernel.
QuantKernel QuantKernelAt(SimdLevel level) {
  static const bool vnni = HasAvx512Vnni();
  if (level >= SimdLevel::kAvx512 && vnni) return QuantKernel::kAvx512Vnni;
  return level >= SimdLevel::kAvx2 ? QuantKernel::kAvx2 : QuantKernel::kScalar;
}

void RunPanels(SimdLevel level, const PanelArgs& a, int64_t begin, int64_t end) {
  if (a.w->format() == PanelFormat::kQ8) {
    switch (QuantKernelAt(level)) {
      case QuantKernel::kAvx512Vnni: internal::QuantPanelsAvx512Vnni(a, begin, end); return;
      case QuantKernel::kAvx2: internal::QuantPanelsAvx2(a, begin, end); return;
      case QuantKernel::kScalar: internal::QuantPanelsScalar(a, begin, end); return;
    }
    return;
  }
  switch (level) {
    case SimdLevel::kAvx512Bf16:
      if (a.w->format() == PanelFormat::kBf16 && AmxBf16(level)) {
        internal::PanelsAmxBf16(a, begin, end);
      } else if (WidenedBf16(level)) {
        internal::PanelsAvx512(a, begin, end);
      } else {
        internal::PanelsAvx512Bf16(a, begin, end);
      }
      return;
    case SimdLevel::kAvx512: internal::PanelsAvx512(a, begin, end); return;
    case SimdLevel::kAvx2: internal::PanelsAvx2(a, begin, end); return;
    case SimdLevel::kScalar: internal::PanelsScalar(a, begin, end); return;
  }
}

// Multiply-adds below which a second thread costs more in synchronisation than it saves.
constexpr int64_t kParallelMacs = int64_t{1} << 18;
// Rows up to which a call is bound by streaming the weights rather than by the math.
constexpr int64_t kStreamingRows = 48;

int64_t MaxRowTile(SimdLevel level) {
  switch (level) {
    case SimdLevel::kAvx512Bf16:
    case SimdLevel::kAvx512: return 12;
    case SimdLevel::kAvx2: return 6;
    case SimdLevel::kScalar: return 4;
  }
  return 1;
}

// The row tiles of an f32 or bf16 call. On AVX2, 7 and 8 rows run as a 5- or 6-row tile
// and a 2-row one over the whole panel rather than as two balanced half-panel tiles: each
// half-panel tile converts every step's weights again, and the 2-row tile holds enough
// sums to run near the FMA rate (the default model's 7- and 8-row forwards with
// CROSSREG_SIMD=avx2 ran faster as 5 + 2 and 6 + 2 than as 4 + 3 and 4 + 4; 9 and 10 rows
// ran no faster as 6 + 3 and 6 + 4; `crossreg-bench-decode --rows 1,...,10` times them).
std::vector<std::pair<int64_t, int64_t>> PlanFloatRowTiles(int64_t rows, SimdLevel level) {
  if (level == SimdLevel::kAvx2 && (rows == 7 || rows == 8)) return {{0, rows - 2}, {rows - 2, 2}};
  return internal::PlanRowTiles(rows, MaxRowTile(level));
}

// The concatenated panels of every output, split between the threads (or all on this
// one), each range mapped back onto its layers.
void RunOutputs(const std::vector<PanelArgs>& args, int64_t rows, bool parallel, ThreadPool& pool, SimdLevel level) {
  const size_t count = args.size();
  std::vector<int64_t> first_panel(count + 1, 0);
  for (size_t i = 0; i < count; ++i) first_panel[i + 1] = first_panel[i] + args[i].w->panels();
  const int64_t total = first_panel.back();
  auto run = [&](int64_t begin, int64_t end) {
    for (size_t i = 0; i < count && begin < end; ++i) {
      const int64_t lo = std::max(begin, first_panel[i]);
      const int64_t hi = std::min(end, first_panel[i + 1]);
      if (lo < hi) RunPanels(level, args[i], lo - first_panel[i], hi - first_panel[i]);
    }
  };
  if (!parallel) {
    run(0, total);
    return;
  }
  if (rows <= kStreamingRows) {
    // Decode and verify steps stream the weights from memory: one contiguous range of
    // panels per thread keeps each core's reads sequential (its prefetches run into
    // panels it will use). The ranges are sized by the cores' measured speeds (the panels
    // of one call cost the same): the 2-core machines' cores stream at rates 12-20% apart.
    pool.ParallelForBalanced(total, 1, run);
  } else {
    // Prefill is compute-bound: dynamic chunks of two panels balance the cores.
    pool.ParallelForDynamic(total, 2, run);
  }
}

// The call's rows quantized for kQ8 panels, in this thread's buffers (valid until the
// thread's next call), and the row tiles the kernels walk.
struct QuantizedCall {
  internal::QuantizedRows rows;
  std::vector<internal::RowTile> tiles;
};

// What a call's kQ8 panels read of its quantized rows: blocks of 32, of 256, or both.
struct QuantizedNeeds {
  bool per32 = false;
  bool per256 = false;
  void Add(const PackedWeights& w) { (w.quant().super_block > 0 ? per256 : per32) = true; }
};

// Whether a call's kQ8 tiles may take kQuantTileRowsAvx2 rows: on AVX2 where every panel
// is of a super-block format (Q2_K..Q6_K). The 32-element formats' tile (Q8_0's sign step
// beside each row) ran slower at 5 and 6 rows than at 4 (the ~110M Q8_0 model's 16-row
// forward and prefill), where Q4_K_M's ran 5 and 6 rows 18-22% faster.
bool SuperBlockTilesAvx2(SimdLevel level, const QuantizedNeeds& needs) {
  return QuantKernelAt(level) == QuantKernel::kAvx2 && !needs.per32;
}

QuantizedCall QuantizeCallRows(const float* x, int64_t rows, int64_t in, bool parallel, ThreadPool& pool,
                               SimdLevel level, int slot, QuantizedNeeds needs) {
  struct Buffers {
    std::vector<int8_t> q, q256;
    std::vector<float> scale, sum16, scale256;
    std::vector<int32_t> offset32, offset16;
    std::vector<int16_t> isum16, isum32;
  };
  thread_local std::vector<Buffers> buffers;
  if (buffers.size() <= static_cast<size_t>(slot)) buffers.resize(static_cast<size_t>(slot) + 1);
  Buffers& b = buffers[static_cast<size_t>(slot)];
  if (needs.per32) {
    b.q.resize(static_cast<size_t>(rows * in));
    b.scale.resize(static_cast<size_t>(rows * (in / 32)));
    b.sum16.resize(static_cast<size_t>(rows * (in / 16)));
  }
  if (needs.per256) {
    b.q256.resize(static_cast<size_t>(rows * in));
    b.scale256.resize(static_cast<size_t>(rows * (in / 256)));
    b.isum16.resize(static_cast<size_t>(rows * (in / 16)));
    b.isum32.resize(static_cast<size_t>(rows * (in / 32)));
  }
  int8_t* const q = b.q.data();
  float* const scale = b.scale.data();
  float* const sum16 = b.sum16.data();
  auto quantize = [&](int64_t begin, int64_t end) {
    const float* xr = x + begin * in;
    const bool avx2 = level >= SimdLevel::kAvx2;
    if (needs.per32) {
      int8_t* qr = q + begin * in;
      float* sr = scale + begin * (in / 32);
      float* ur = sum16 + begin * (in / 16);
      if (avx2) {
        internal::QuantizeRowsAvx2(xr, end - begin, in, qr, sr, ur);
      } else {
        internal::QuantizeRowsScalar(xr, end - begin, in, qr, sr, ur);
      }
    }
    if (needs.per256) {
      int8_t* qr = b.q256.data() + begin * in;
      float* sr = b.scale256.data() + begin * (in / 256);
      int16_t* u16 = b.isum16.data() + begin * (in / 16);
      int16_t* u32 = b.isum32.data() + begin * (in / 32);
      if (avx2) {
        internal::QuantizeRows256Avx2(xr, end - begin, in, qr, sr, u16, u32);
      } else {
        internal::QuantizeRows256Scalar(xr, end - begin, in, qr, sr, u16, u32);
      }
    }
  };
  // Rows are independent: prefill's hundreds are split between the cores.
  if (parallel && rows >= 16) {
    pool.ParallelFor(rows, 8, quantize);
  } else {
    quantize(0, rows);
  }
  QuantizedCall call;
  call.rows = {q, scale, sum16, in};
  if (needs.per256) {
    call.rows.q256 = b.q256.data();
    call.rows.scale256 = b.scale256.data();
    call.rows.isum16 = b.isum16.data();
    call.rows.isum32 = b.isum32.data();
  }
  if (needs.per32 && QuantKernelAt(level) == QuantKernel::kAvx512Vnni) {
    // Where its sums of signed formats start (exact: code sums are small integers).
    b.offset16.resize(static_cast<size_t>(rows * (in / 16)));
    b.offset32.resize(static_cast<size_t>(rows * (in / 32)));
    for (int64_t i = 0; i < rows * (in / 16); ++i) b.offset16[i] = -128 * static_cast<int32_t>(sum16[i]);
    for (int64_t i = 0; i < rows * (in / 32); ++i) b.offset32[i] = b.offset16[2 * i] + b.offset16[2 * i + 1];
    call.rows.offset32 = b.offset32.data();
    call.rows.offset16 = b.offset16.data();
  }
  const int64_t tile_rows =
      QuantKernelAt(level) == QuantKernel::kAvx512Vnni ? internal::kQuantTileRowsVnni
      : SuperBlockTilesAvx2(level, needs)               ? internal::kQuantTileRowsAvx2
                                                        : internal::kQuantTileRows;
  for (const auto& [first, count] : internal::PlanRowTiles(rows, tile_rows)) {
    call.tiles.push_back({first, count, nullptr});
  }
  return call;
}

// x's rows in AMX row tiles of up to 16 rows (engine/cpu/linear_kernels.h), in `buf`; with
// a pool the threads pack the tiles between them (each tile whole, by one thread).
std::vector<internal::RowTile> PackAmxRowTiles(const float* x, int64_t in, int64_t rows, std::vector<uint32_t>& buf,
                                               ThreadPool* pool) {
  const auto plan = internal::PlanRowTiles(rows, internal::kAmxTileRows);
  const int64_t tile_pairs = internal::AmxTilePairs(in);
  buf.resize(static_cast<size_t>(tile_pairs) * plan.size());
  uint32_t* const packed = buf.data();
  auto pack = [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t) {
      const auto [first, count] = plan[static_cast<size_t>(t)];
      internal::PackRowTileBf16Amx(x, in, first, count, internal::AmxRowsRead(count, plan.size()),
                                   packed + t * tile_pairs);
    }
  };
  if (pool != nullptr && plan.size() > 1) {
    pool->ParallelFor(static_cast<int64_t>(plan.size()), 1, pack);
  } else {
    pack(0, static_cast<int64_t>(plan.size()));
  }
  std::vector<internal::RowTile> tiles;
  for (size_t t = 0; t < plan.size(); ++t) {
    tiles.push_back({plan[t].first, plan[t].second, packed + static_cast<int64_t>(t) * tile_pairs});
  }
  return tiles;
}

using RowTilePlan = std::vector<std::pair<int64_t, int64_t>>;

// The panel formats a LinearShared call's outputs use, what its kQ8 ones read, and its
// multiply-adds (which decide whether the call is split between the threads).
struct OutputMix {
  bool any_f32 = false;
  bool any_bf16 = false;
  bool any_q8 = false;
  QuantizedNeeds q8_needs;
  int64_t macs = 0;
};

OutputMix SurveyOutputs(const LinearOutput* outputs, int count, int64_t rows) {
  OutputMix mix;
  for (int i = 0; i < count; ++i) {
    const PanelFormat f = outputs[i].w->format();
    (f == PanelFormat::kF32 ? mix.any_f32 : f == PanelFormat::kQ8 ? mix.any_q8 : mix.any_bf16) = true;
    if (f == PanelFormat::kQ8) mix.q8_needs.Add(*outputs[i].w);
    mix.macs += rows * outputs[i].w->in() * outputs[i].w->out();
  }
  return mix;
}

// One tile per planned tile, tile t reading `base` from element starts[t].
std::vector<internal::RowTile> TilesAt(const RowTilePlan& plan, const std::vector<int64_t>& starts, const void* base,
                                       size_t element) {
  std::vector<internal::RowTile> tiles;
  for (size_t t = 0; t < plan.size(); ++t) {
    tiles.push_back({plan[t].first, plan[t].second, static_cast<const char*>(base) + starts[t] * element});
  }
  return tiles;
}

// x's rows as f32 in the kernels' row tiles, in this thread's buffer (valid until the
// thread's next call).
std::vector<internal::RowTile> PackF32RowTiles(const float* x, int64_t in, int64_t rows, const RowTilePlan& plan) {
  thread_local std::vector<float> x_f32;
  x_f32.resize(static_cast<size_t>(rows * in));
  return TilesAt(plan, internal::PackRowTilesF32(x, in, plan, x_f32.data()), x_f32.data(), sizeof(float));
}

// x's rows as bf16 pairs in the kernels' row tiles, or where bf16 panels run widened
// (WidenedBf16) those pairs' values as f32, in this thread's buffers (valid until the
// thread's next call).
std::vector<internal::RowTile> PackBf16RowTiles(const float* x, int64_t in, int64_t rows, const RowTilePlan& plan,
                                                SimdLevel level, bool parallel, ThreadPool& pool) {
  thread_local std::vector<uint32_t> x_bf16;
  thread_local std::vector<float> x_wide;
  x_bf16.resize(static_cast<size_t>(rows * ((in + 1) / 2)));
  const std::vector<int64_t> starts = internal::RowTileStartsBf16(in, plan);
  const bool avx512 = level >= SimdLevel::kAvx512;
  const bool widened = WidenedBf16(level);
  if (widened) x_wide.resize(2 * x_bf16.size());
  // The buffers are this thread's: take their addresses here, not inside the workers.
  uint32_t* const packed = x_bf16.data();
  float* const wide = x_wide.data();
  auto pack = [&](int64_t begin, int64_t end) {
    if (level == SimdLevel::kAvx2) return internal::PackRowTilesWideAvx2(x, in, plan, starts, wide, begin, end);
    internal::PackRowTilesBf16Range(x, in, plan, starts, packed, avx512, begin, end);
    if (!widened) return;
    for (int64_t t = begin; t < end; ++t) {
      const int64_t first = starts[static_cast<size_t>(t)];
      internal::WidenBf16Pairs(packed, first, first + (in + 1) / 2 * plan[static_cast<size_t>(t)].second, wide);
    }
  };
  // The threads pack the row tiles between them whenever the layer itself is split.
  // Prefill's hundreds of rows take ~5% of a linear layer to round and pack, too much to
  // leave to one core. A verify step's few tiles are cheap to pack, but the per-row ops
  // before the layer split its rows between the threads in the same order (first rows
  // here), so each core mostly packs rows it wrote itself, from its own cache; packed by
  // one core, half of the rows would first cross to it from the other (with the per-row
  // ops split from 6 rows on: a few percent of a 16-32 row forward of the ~110M model,
  // as `crossreg-bench-decode --rows 16,32` shows).
  if (parallel && plan.size() > 1) {
    pool.ParallelFor(static_cast<int64_t>(plan.size()), 1, pack);
  } else {
    pack(0, static_cast<int64_t>(plan.size()));
  }
  return widened ? TilesAt(plan, starts, x_wide.data(), 2 * sizeof(float))
                 : TilesAt(plan, starts, x_bf16.data(), sizeof(uint32_t));
}

// Each output's kernel arguments, its tiles those of its panels' format.
std::vector<PanelArgs> SharedPanelArgs(const LinearOutput* outputs, int count, int64_t rows,
                                       const std::vector<internal::RowTile>& tiles_f32,
                                       const std::vector<internal::RowTile>& tiles_bf16,
                                       const QuantizedCall& quantized, TileOrder order) {
  std::vector<PanelArgs> args(static_cast<size_t>(count));
  for (int i = 0; i < count; ++i) {
    const PackedWeights& w = *outputs[i].w;
    PanelArgs& a = args[static_cast<size_t>(i)];
    a.w = &w;
    const auto& tiles = w.format() == PanelFormat::kF32 ? tiles_f32
                        : w.format() == PanelFormat::kQ8 ? quantized.tiles
                                                         : tiles_bf16;
    if (w.format() == PanelFormat::kQ8) a.qx = &quantized.rows;
    a.tiles = tiles.data();
    a.num_tiles = static_cast<int>(tiles.size());
    a.rows = rows;
    a.y = outputs[i].y;
    a.y_stride = w.out();
    a.order = order;
  }
  return args;
}

}  // namespace

const char* QuantKernelName(SimdLevel level) {
  switch (QuantKernelAt(level)) {
    case QuantKernel::kAvx512Vnni: return "vpdpbusd (AVX-512 VNNI)";
    case QuantKernel::kAvx2: return "vpmaddubsw (AVX2)";
    case QuantKernel::kScalar: return "portable";
  }
  return "portable";
}

void LinearShared(const LinearOutput* outputs, int count, const float* x, int64_t rows, ThreadPool& pool,
                  SimdLevel level) {
  if (count <= 0 || rows <= 0) return;
  level = ClampSimdLevel(level);
  const int64_t in = outputs[0].w->in();
  // The activations, once, in the kernels' row-tile layout: f32 for f32 panels, bf16
  // pairs for bf16 panels, or on AVX2 those pairs' values as f32 (a group may mix them).
  const auto plan = PlanFloatRowTiles(rows, level);
  const OutputMix mix = SurveyOutputs(outputs, count, rows);
  const bool parallel = mix.macs >= kParallelMacs && pool.num_threads() > 1;
  std::vector<internal::RowTile> tiles_f32, tiles_bf16;
  if (mix.any_f32) tiles_f32 = PackF32RowTiles(x, in, rows, plan);
  thread_local std::vector<uint32_t> x_amx;
  const bool amx = mix.any_bf16 && AmxBf16(level);
  if (amx) {
    tiles_bf16 = PackAmxRowTiles(x, in, rows, x_amx, parallel ? &pool : nullptr);
  } else if (mix.any_bf16) {
    tiles_bf16 = PackBf16RowTiles(x, in, rows, plan, level, parallel, pool);
  }
  QuantizedCall quantized;
  if (mix.any_q8) quantized = QuantizeCallRows(x, rows, in, parallel, pool, level, 0, mix.q8_needs);
  // Verify-sized calls with several tiles have two loop orders on the AVX-512 paths, and
  // on the kQ8 kernels from AVX2 up (quant_panel_order.h); which is faster depends on the
  // core, so the calls time both (tile_order_chooser.h).
  const bool q8_orders = mix.any_q8 && QuantKernelAt(level) != QuantKernel::kScalar && quantized.tiles.size() > 1;
  // (The AMX kernel has one order: calls of its panels alone are not timed.)
  const bool vector_orders =
      level >= SimdLevel::kAvx512 && plan.size() > 1 && (mix.any_f32 || (mix.any_bf16 && !amx));
  const bool two_orders = rows <= internal::kBlockedRows && (vector_orders || q8_orders);
  LinearCallShape shape{.in = in, .panels = 0, .rows = rows, .threads = parallel ? pool.num_threads() : 1};
  for (int i = 0; i < count; ++i) shape.panels += outputs[i].w->panels();
  TileOrderChooser& chooser = TileOrderChooser::Global();
  const TileOrderChooser::Decision order = two_orders ? chooser.Next(shape) : TileOrderChooser::Decision{};
  const std::vector<PanelArgs> args =
      SharedPanelArgs(outputs, count, rows, tiles_f32, tiles_bf16, quantized, order.order);
  if (!order.trial) {
    RunOutputs(args, rows, parallel, pool, level);
    return;
  }
  const auto start = std::chrono::steady_clock::now();
  RunOutputs(args, rows, parallel, pool, level);
  chooser.Report(shape, order.order,
                 std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
}

void LinearEach(const LinearJob* jobs, int count, int64_t rows, ThreadPool& pool, SimdLevel level) {
  if (count <= 0 || rows <= 0) return;
  level = ClampSimdLevel(level);
  const auto plan = PlanFloatRowTiles(rows, level);
  const bool avx512 = level >= SimdLevel::kAvx512;
  int64_t macs = 0;
  for (int i = 0; i < count; ++i) macs += rows * jobs[i].w->in() * jobs[i].w->out();
  const bool parallel = macs >= kParallelMacs && pool.num_threads() > 1;
  // Each input in its own tiles (these calls are small: the packing stays on this thread).
  thread_local std::vector<std::vector<uint32_t>> packed;
  thread_local std::vector<std::vector<float>> widened_x;
  if (packed.size() < static_cast<size_t>(count)) packed.resize(static_cast<size_t>(count));
  if (widened_x.size() < static_cast<size_t>(count)) widened_x.resize(static_cast<size_t>(count));
  const bool widened = WidenedBf16(level);
  std::vector<std::vector<internal::RowTile>> tiles(static_cast<size_t>(count));
  std::vector<PanelArgs> args(static_cast<size_t>(count));
  std::vector<QuantizedCall> quantized(static_cast<size_t>(count));
  for (int i = 0; i < count; ++i) {
    const PackedWeights& w = *jobs[i].w;
    const int64_t in = w.in();
    std::vector<uint32_t>& buf = packed[static_cast<size_t>(i)];
    std::vector<int64_t> starts;
    PanelArgs& a = args[static_cast<size_t>(i)];
    if (w.format() == PanelFormat::kQ8) {
      QuantizedCall& call = quantized[static_cast<size_t>(i)];
      QuantizedNeeds needs;
      needs.Add(w);
      call = QuantizeCallRows(jobs[i].x, rows, in, false, pool, level, i, needs);
      a.w = &w;
      a.qx = &call.rows;
      a.tiles = call.tiles.data();
      a.num_tiles = static_cast<int>(call.tiles.size());
      a.rows = rows;
      a.y = jobs[i].y;
      a.y_stride = w.out();
      a.order = TileOrder::kWholeK;  // these small calls are not timed
      continue;
    }
    if (w.format() == PanelFormat::kBf16 && AmxBf16(level)) {
      tiles[static_cast<size_t>(i)] = PackAmxRowTiles(jobs[i].x, in, rows, buf, nullptr);
    } else if (w.format() == PanelFormat::kF32) {
      buf.resize(static_cast<size_t>(rows * in));
      starts = internal::PackRowTilesF32(jobs[i].x, in, plan, reinterpret_cast<float*>(buf.data()));
    } else {
      buf.resize(static_cast<size_t>(rows * ((in + 1) / 2)));
      starts = internal::RowTileStartsBf16(in, plan);
      if (level != SimdLevel::kAvx2) {  // AVX2 packs straight into the widened floats below
        internal::PackRowTilesBf16Range(jobs[i].x, in, plan, starts, buf.data(), avx512, 0,
                                        static_cast<int64_t>(plan.size()));
      }
    }
    if (tiles[static_cast<size_t>(i)].empty()) {  // (AMX row tiles are made above)
      const bool wide = widened && w.format() == PanelFormat::kBf16;
      std::vector<float>& wide_buf = widened_x[static_cast<size_t>(i)];
      if (wide) {
        wide_buf.resize(2 * buf.size());
        if (level == SimdLevel::kAvx2) {
          internal::PackRowTilesWideAvx2(jobs[i].x, in, plan, starts, wide_buf.data(), 0,
                                         static_cast<int64_t>(plan.size()));
        } else {
          internal::WidenBf16Pairs(buf.data(), 0, static_cast<int64_t>(buf.size()), wide_buf.data());
        }
      }
      for (size_t t = 0; t < plan.size(); ++t) {
        const void* tile_x = wide ? static_cast<const void*>(wide_buf.data() + 2 * starts[t])
                                  : static_cast<const void*>(buf.data() + starts[t]);
        tiles[static_cast<size_t>(i)].push_back({plan[t].first, plan[t].second, tile_x});
      }
    }
    a.w = &w;
    a.tiles = tiles[static_cast<size_t>(i)].data();
    a.num_tiles = static_cast<int>(tiles[static_cast<size_t>(i)].size());
    a.rows = rows;
    a.y = jobs[i].y;
    a.y_stride = w.out();
  }
  RunOutputs(args, rows, parallel, pool, level);
}

void Linear(const PackedWeights& w, const float* x, int64_t rows, float* y, ThreadPool& pool, SimdLevel level) {
  const LinearOutput output{&w, y};
  LinearShared(&output, 1, x, rows, pool, level);
}

void LinearReference(const TensorRef& w, const float* x, int64_t rows, float* y) {
  const int64_t in = w.cols();
  const int64_t out = w.rows();
  std::vector<float> row(static_cast<size_t>(in));
  for (int64_t o = 0; o < out; ++o) {
    ConvertToF32(w.dtype, static_cast<const char*>(w.data) + static_cast<size_t>(o) * w.row_bytes(), row.data(),
                 static_cast<size_t>(in));
    for (int64_t r = 0; r < rows; ++r) {
      double acc = 0.0;
      for (int64_t i = 0; i < in; ++i) acc += double(row[static_cast<size_t>(i)]) * x[r * in + i];
      y[r * out + o] = static_cast<float>(acc);
    }
  }
}

}  // namespace crossreg::cpu
