// Which loop order a verify-sized linear call runs on this machine, chosen by timing
// both orders on the calls themselves.
//
// A call of 13-48 rows has 2-4 row tiles (engine/cpu/linear_kernels.h); a call on
// quantized weights has tiles of 4 rows (6 on the VNNI kernel), so 2-12 from 5 rows on
// (2-8 from 7). The AVX-512 kernels, and
// the quantized ones from AVX2 up (engine/cpu/quant_panel_order.h), can run them in two
// orders over each panel of 32 outputs:
//  - kBlocked: the tiles take turns per 8 KiB K block, so each weight streams from
//    memory once while every tile's math runs on it from L1. Usually the faster order
//    on Zen 5.
//  - kWholeK: each tile runs the panel's whole K in turn; the later tiles re-read the
//    panel (48-128 KiB) from L2. It has won 16-32 row forwards of the ~110M model on Zen
//    4 (32 KiB L1, the bf16 dot product at half Zen 5's rate).
// `crossreg-bench-decode --rows 1,16,24,32` prints both orders' times per call shape.
// Which one wins depends on the core, so neither is hard-wired. Both accumulate every
// output over its K steps in the same order, so the choice never changes a result bit,
// only the time (tests/unit/linear_kernel_test.cc proves it on every path).
//
// Per call shape (input width, panels, rows, threads), kTrials calls of each order alternate;
// then the order with the lower median time serves that shape for kServeCalls calls,
// and the comparison runs again. Alternating calls of one shape see the same load from
// elsewhere on the machine, so a burst hits both orders alike, and the median ignores
// the calls it lands on. The comparison repeats because the winner moves with the
// machine's state: on a shared Zen 4 host K-blocked wins at 16-24 rows while the memory
// is slow and loses while it is fast (docs/benchmarks.md, "Zen 4: the ~110M rows table",
// describes the two states).
// A trial round costs about half its calls' difference (~1% of one call per 40 served).
#pragma once

#include <cstdint>
#include <mutex>
#include <optional>
#include <vector>

namespace crossreg::cpu {

enum class TileOrder { kBlocked, kWholeK };

struct LinearCallShape {
  int64_t in = 0;      // input width
  int64_t panels = 0;  // panels of 32 outputs, all outputs of the call together
  int64_t rows = 0;
  // Threads that share the call: 1 for a row-split forward's per-thread calls and for
  // calls too small to split. Split between cores, each core streams its own range of
  // the panels; on one core, the call streams all of them. The two orders' costs differ
  // with that, so each thread count chooses apart.
  int threads = 1;
  bool operator==(const LinearCallShape&) const = default;
};

class TileOrderChooser {
 public:
  static constexpr int kTrials = 12;         // calls of each order per shape before choosing
  static constexpr int kServeCalls = 1000;   // calls served by a choice before the next trials

  struct Decision {
    TileOrder order = TileOrder::kBlocked;
    bool trial = false;  // still comparing: time the call and Report it
  };
  // The order the next call of `shape` should run.
  Decision Next(const LinearCallShape& shape);
  // A trial call of `shape` ran `order` in `seconds`.
  void Report(const LinearCallShape& shape, TileOrder order, double seconds);
  // The order last chosen for `shape` (kept through later trials).
  std::optional<TileOrder> Chosen(const LinearCallShape& shape) const;

  // Every shape decided so far, with the trials' median seconds per order (for logs and
  // benchmarks).
  struct Outcome {
    LinearCallShape shape;
    TileOrder chosen = TileOrder::kBlocked;
    double median_seconds[2] = {0, 0};  // indexed by TileOrder
  };
  std::vector<Outcome> Decided() const;

  // The process's chooser, which the CPU backend's linear layers consult: the winner
  // is a property of the machine and the shape, shared by every backend.
  static TileOrderChooser& Global();

 private:
  struct Entry {
    LinearCallShape shape;
    std::vector<double> seconds[2];  // per order, during the trials
    int handed_out = 0;              // trial calls given an order so far (alternating)
    int served = 0;                  // calls served by `chosen` since it was chosen
    std::optional<TileOrder> chosen;
    double median_seconds[2] = {0, 0};
  };
  Entry& Find(const LinearCallShape& shape);  // with mu_ held

  mutable std::mutex mu_;
  std::vector<Entry> entries_;  // a few shapes per model and row count: a linear search
};

}  // namespace crossreg::cpu
