#include "engine/cpu/cpu_features.h"

#include <cstdlib>
#include <cstring>
#include <fstream>

#if defined(__linux__)
#include <sys/syscall.h>
#include <unistd.h>
#endif

namespace crossreg::cpu {
namespace {

SimdLevel Detect() {
  SimdLevel level = SimdLevel::kScalar;
#if defined(__x86_64__) || defined(__i386__)
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c")) {
    level = SimdLevel::kAvx2;
  }
  if (level == SimdLevel::kAvx2 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq")) {
    level = SimdLevel::kAvx512;
  }
  if (level == SimdLevel::kAvx512 && __builtin_cpu_supports("avx512bf16")) level = SimdLevel::kAvx512Bf16;
#endif
  // An override may only lower the level: asking for an ISA the CPU lacks would crash.
  if (const char* env = std::getenv("CROSSREG_SIMD")) {
    SimdLevel wanted = level;
    if (std::strcmp(env, "scalar") == 0) wanted = SimdLevel::kScalar;
    if (std::strcmp(env, "avx2") == 0) wanted = SimdLevel::kAvx2;
    if (std::strcmp(env, "avx512") == 0) wanted = SimdLevel::kAvx512;
    if (std::strcmp(env, "avx512bf16") == 0) wanted = SimdLevel::kAvx512Bf16;
    if (static_cast<int>(wanted) < static_cast<int>(level)) level = wanted;
  }
  return level;
}

}  // namespace

SimdLevel DetectedSimdLevel() {
  static const SimdLevel level = Detect();
  return level;
}

const char* SimdLevelName(SimdLevel level) {
  switch (level) {
    case SimdLevel::kScalar: return "scalar";
    case SimdLevel::kAvx2: return "avx2";
    case SimdLevel::kAvx512: return "avx512";
    case SimdLevel::kAvx512Bf16: return "avx512bf16";
  }
  return "?";
}

std::vector<SimdLevel> AvailableSimdLevels() {
  std::vector<SimdLevel> levels;
  for (int l = 0; l <= static_cast<int>(DetectedSimdLevel()); ++l) levels.push_back(static_cast<SimdLevel>(l));
  return levels;
}

SimdLevel ClampSimdLevel(SimdLevel wanted) {
  return static_cast<int>(wanted) < static_cast<int>(DetectedSimdLevel()) ? wanted : DetectedSimdLevel();
}

std::string CpuModelName() {
  std::ifstream in("/proc/cpuinfo");
  std::string line, name = "unknown CPU", family, model;
  auto value = [&line]() {
    const size_t colon = line.find(':');
    if (colon == std::string::npos) return std::string();
    const size_t start = line.find_first_not_of(" \t", colon + 1);
    return start == std::string::npos ? std::string() : line.substr(start);
  };
  while (std::getline(in, line)) {
    if (line.empty()) break;  // the first processor's block is enough
    if (line.rfind("model name", 0) == 0) {
      const std::string v = value();
      if (!v.empty()) name = v;
    } else if (line.rfind("cpu family", 0) == 0) {
      family = value();
    } else if (line.rfind("model", 0) == 0 && line.rfind("model name", 0) != 0) {
      model = value();
    }
  }
  if (!family.empty() && !model.empty()) name += " (family " + family + ", model " + model + ")";
  return name;
}

bool HasAvx512Vnni() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512vnni");
#else
  return false;
#endif
}

namespace {

struct AmxState {
  bool usable = false;
  const char* reason = "";
};

AmxState DetectAmx() {
#if defined(__x86_64__) && defined(__linux__)
  if (DetectedSimdLevel() < SimdLevel::kAvx512Bf16) return {false, "CROSSREG_SIMD or the CPU is below avx512bf16"};
  unsigned eax = 7, ebx = 0, ecx = 0, edx = 0;
  __asm__ volatile("cpuid" : "+a"(eax), "=b"(ebx), "+c"(ecx), "=d"(edx));
  // EDX bits 22 (AMX-BF16), 24 (AMX-TILE), 25 (AMX-INT8).
  constexpr unsigned kAmxBits = (1u << 22) | (1u << 24) | (1u << 25);
  if ((edx & kAmxBits) != kAmxBits) return {false, "the CPU has no AMX"};
  if (const char* env = std::getenv("CROSSREG_AMX"); env != nullptr && std::strcmp(env, "0") == 0) {
    return {false, "CROSSREG_AMX=0"};
  }
  eax = 1;
  ecx = 0;
  __asm__ volatile("cpuid" : "+a"(eax), "=b"(ebx), "+c"(ecx), "=d"(edx));
  if ((ecx & (1u << 27)) == 0) return {false, "the OS does not save the tile state"};  // no OSXSAVE
  unsigned xcr0_lo = 0, xcr0_hi = 0;
  __asm__ volatile("xgetbv" : "=a"(xcr0_lo), "=d"(xcr0_hi) : "c"(0));
  constexpr unsigned kTileBits = (1u << 17) | (1u << 18);  // XTILECFG, XTILEDATA
  if ((xcr0_lo & kTileBits) != kTileBits) return {false, "the OS does not save the tile state"};
  constexpr long kArchReqXcompPerm = 0x1023;
  constexpr long kXfeatureXtiledata = 18;
  if (syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) != 0) {
    return {false, "Linux refused the tile data (arch_prctl)"};
  }
  return {true, ""};
#else
  return {false, "the CPU has no AMX"};
#endif
}

const AmxState& Amx() {
  static const AmxState state = DetectAmx();
  return state;
}

}  // namespace

bool HasAmx() { return Amx().usable; }
const char* AmxUnavailableReason() { return Amx().reason; }

std::string CpuIsaSummary() {
  std::string out;
#if defined(__x86_64__) || defined(__i386__)
  __builtin_cpu_init();
  auto add = [&out](bool has, const char* name) {
    if (!has) return;
    if (!out.empty() && out.back() != ' ') out += ' ';
    out += name;
  };
  add(__builtin_cpu_supports("avx2"), "AVX2");
  add(__builtin_cpu_supports("fma"), "FMA");
  add(__builtin_cpu_supports("f16c"), "F16C");
  const bool avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                      __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq");
  if (avx512) {
    out += "; AVX-512 F/BW/VL/DQ";
    add(__builtin_cpu_supports("avx512vnni"), "VNNI");
    add(__builtin_cpu_supports("avx512bf16"), "BF16");
  } else {
    out += "; no AVX-512";
  }
  // GCC 12's __builtin_cpu_supports has no AMX names: CPUID leaf 7 EDX bit 24 (AMX-TILE).
  unsigned eax = 7, ebx = 0, ecx = 0, edx = 0;
  ecx = 0;
  __asm__ volatile("cpuid" : "+a"(eax), "=b"(ebx), "+c"(ecx), "=d"(edx));
  if (edx & (1u << 24)) {
    out += "; AMX";
    if (!HasAmx()) out += std::string(" (not used: ") + AmxUnavailableReason() + ")";
  }
#endif
  return out.empty() ? "portable (no x86 SIMD detected)" : out;
}

}  // namespace crossreg::cpu
