#include "engine/decoding/exactness_fault.h"

#include <atomic>

namespace crossreg {
namespace {
// Read by the scheduler's thread while a test thread holds the scope: atomic.
std::atomic<ExactnessFault> planted{ExactnessFault::kNone};
}  // namespace

ExactnessFault PlantedExactnessFault() { return planted.load(std::memory_order_relaxed); }

ScopedExactnessFault::ScopedExactnessFault(ExactnessFault fault) { planted.store(fault, std::memory_order_relaxed); }

ScopedExactnessFault::~ScopedExactnessFault() { planted.store(ExactnessFault::kNone, std::memory_order_relaxed); }

}  // namespace crossreg
