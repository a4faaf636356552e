#pragma once
// The one table of CUDA kernel configs, and the shape heuristic that picks
// from it.
//
// Everything that needs to know which kernels exist reads kConfigs:
//   - the chooser below (select_kernel) and the validation of a user override,
//   - the family translation units (csrc/cuda/launch_*.cu), which instantiate
//     exactly the rows of their family and nothing else,
//   - tilelab_torch.kernels() (through the _kernel_table op in csrc/ops.cpp),
//     which in turn parametrizes the tests and the benchmarks.
// Adding a kernel = its header under kernels/ + a row here (+ a launch_*.cu
// once per new family).
//
// This header is host-only C++ (no CUDA): the CPU-only build includes it too,
// so kernels() lists the same table everywhere.
#include <c10/core/ScalarType.h>
#include <c10/util/Exception.h>

#include <cstdint>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <utility>

namespace tilelab {

enum class Family : int { Naive, Tiled, Padded, Blocked, TensorCore, Hopper };

inline const char* family_name(Family f) {
  switch (f) {
    case Family::Naive: return "naive";
    case Family::Tiled: return "tiled";
    case Family::Padded: return "padded";
    case Family::Blocked: return "blocked";
    case Family::TensorCore: return "tensorcore";
    case Family::Hopper: return "hopper";
  }
  return "?";
}

// Whether this build carries sm_90a device code (TORCH_CUDA_ARCH_LIST with
// "9.0a"; setup.py turns a plain "9.0" into it): the hopper family's wgmma and
// TMA kernels exist only then, and run only on compute capability 9.0.
#ifdef TILELAB_SM90A
inline constexpr bool kBuiltForSm90a = true;
#else
inline constexpr bool kBuiltForSm90a = false;
#endif

// Dtypes a config supports, as a bit mask.
enum DtypeBits : unsigned {
  kF32 = 1u << 0,
  kF64 = 1u << 1,
  kF16 = 1u << 2,
  kBF16 = 1u << 3,
  kAllFloat = kF32 | kF64 | kF16 | kBF16,
};

inline unsigned dtype_bit(c10::ScalarType t) {
  switch (t) {
    case c10::ScalarType::Float: return kF32;
    case c10::ScalarType::Double: return kF64;
    case c10::ScalarType::Half: return kF16;
    case c10::ScalarType::BFloat16: return kBF16;
    default: return 0;
  }
}

struct KernelConfig {
  const char* name;     // unique; the same string in kernels(), test ids, benchmark tables
  const char* variant;  // what a user passes as variant=
  Family family;
  int tile;             // what a user passes as tile=
  int bm, bn, bk;       // block tile: a block computes bm x bn outputs, bk of K per step
  int threads;          // threads per block
  int pad;              // kPad: extra elements at the end of each shared-memory row
  unsigned dtypes;      // DtypeBits
  int min_sm;           // lowest compute capability (major*10 + minor)
  const char* summary;
  // Runs fp32 inputs on TF32 tensor cores (10-bit mantissa): only allowed when
  // torch.get_float32_matmul_precision() is "high" or "medium" (Problem.allow_tf32).
  // Last member with a default so that rows without it stay valid.
  bool tf32 = false;
};

// clang-format off
inline constexpr KernelConfig kConfigs[] = {
  // name                     variant         family          T  bm  bn  bk thr   pad dtypes     sm  summary
  {"naive_8x8",               "naive",        Family::Naive,   8,  8,  8,  0,   64, 0, kAllFloat, 0, "one thread per output, operands straight from global memory"},
  {"naive_16x16",             "naive",        Family::Naive,  16, 16, 16,  0,  256, 0, kAllFloat, 0, "one thread per output, operands straight from global memory"},
  {"naive_32x32",             "naive",        Family::Naive,  32, 32, 32,  0, 1024, 0, kAllFloat, 0, "one thread per output, operands straight from global memory"},
  {"tiled_8x8x8",             "tiled",        Family::Tiled,   8,  8,  8,  8,   64, 0, kAllFloat, 0, "TxT shared-memory tiles, one output per thread, boundary-safe"},
  {"tiled_16x16x16",          "tiled",        Family::Tiled,  16, 16, 16, 16,  256, 0, kAllFloat, 0, "TxT shared-memory tiles, one output per thread, boundary-safe"},
  {"tiled_32x32x32",          "tiled",        Family::Tiled,  32, 32, 32, 32, 1024, 0, kAllFloat, 0, "TxT shared-memory tiles, one output per thread, boundary-safe"},
  {"padded_16x16x16",         "padded",       Family::Padded, 16, 16, 16, 16,  256, 1, kAllFloat, 0, "tiled, A tile stored k-major, rows padded by kPad=1 against bank conflicts"},
  {"padded_32x32x32",         "padded",       Family::Padded, 32, 32, 32, 32, 1024, 1, kAllFloat, 0, "tiled, A tile stored k-major, rows padded by kPad=1 against bank conflicts"},
  {"padded_nopad_16x16x16",   "padded_nopad", Family::Padded, 16, 16, 16, 16,  256, 0, kAllFloat, 0, "the padded kernel with kPad=0: the bank-conflict baseline"},
  {"padded_nopad_32x32x32",   "padded_nopad", Family::Padded, 32, 32, 32, 32, 1024, 0, kAllFloat, 0, "the padded kernel with kPad=0: the bank-conflict baseline"},
  // blocked: 8 x TN register tile per thread (TN = bm*bn / (threads*8)), warp tile 32 x 8*TN, cp.async 4 stages
  // deep at BK=8 and 3 at BK=16, copy code fixed per operand layout at compile time (3 x 3 instantiations per
  // row). Chosen with the standalone sweep of the current main loop (benchmarks/tuning/blocked_variants/,
  // results in benchmarks/results/h200-2026-11-21/blocked/run6/, NVIDIA H200); measured there and dropped:
  // 128x256 at BK=16 (2.906 vs 2.814 ms at 4096^3), 64x64 at BK=8 (0.0186 vs 0.0205 ms at 512^3 but
  // 3.411 vs 3.280 at 4096^3 and 0.170 vs 0.153 at 8x4096x4096), 128x128 with 8x8 in 256 threads
  // (2 blocks/SM: 3.173 ms at 4096^3) and with 8x16 in 128 threads (2.946; 1.651 vs 1.244 for 64x128 at
  // 3072^3). The earlier main loop's sweeps are in run3/ and run4/.
  {"blocked_k16_64x64x16",    "blocked_k16",  Family::Blocked, 64, 64, 64,16,  128, 4, kF32,     80, "register-blocked 8x4 per thread, warp-tiled, BK=16, float4 + 3-stage cp.async, A k-major kPad=4"},
  {"blocked_64x128x8",        "blocked",      Family::Blocked,128, 64,128, 8,  128, 4, kF32,     80, "register-blocked 8x8 per thread, 64x128 block tile, BK=8, 4-stage cp.async"},
  {"blocked_wide_128x256x8",  "blocked_wide", Family::Blocked,256,128,256, 8,  256, 4, kF32,     80, "register-blocked 8x16 per thread, 128x256 block tile, BK=8, 4-stage cp.async"},
  // tensorcore: mma.sync, 4-stage cp.async pipeline (16-byte copies only; unaligned operands are copied
  // to an aligned buffer first), ldmatrix, register double buffering; 2 x (threads/64) warp grid.
  // bk is 64 bytes of K per stage (32 half / 16 fp32 elements), 128 bytes for the 128x256 rows (1 block/SM,
  // 209-221 KB of shared memory): half the barriers per K. The half row beat its BK=32 twin on every shape
  // measured (H200, benchmarks/results/h200-2026-11-21/tensorcore/run4/: bf16 4096^3 0.387 vs 0.403 ms,
  // 8192^3 2.82-2.90 vs 3.06-3.09 ms, 4097^3 0.516 vs 0.549 ms), which it replaced.
  {"tensorcore_128x128x32",   "tensorcore",   Family::TensorCore, 128, 128, 128, 32, 128, 8, kF16 | kBF16, 80, "mma.sync m16n8k16 (fp32 acc), 4-stage cp.async + ldmatrix, 4 warps of 64x64, 2 blocks/SM"},
  {"tensorcore_128x256x64",   "tensorcore",   Family::TensorCore, 256, 128, 256, 64, 256, 8, kF16 | kBF16, 80, "mma.sync m16n8k16 (fp32 acc), BK=64, 4-stage cp.async + ldmatrix, 8 warps of 64x64"},
  {"tensorcore_64x64x32",     "tensorcore",   Family::TensorCore,  64,  64,  64, 32, 128, 8, kF16 | kBF16, 80, "mma.sync m16n8k16 (fp32 acc), 4-stage cp.async + ldmatrix, 4 warps of 32x32"},
  {"tensorcore_tf32_128x128x16", "tensorcore_tf32", Family::TensorCore, 128, 128, 128, 16, 128, 4, kF32, 80, "TF32 mma.sync m16n8k8 (needs precision 'high'), 4-stage cp.async, 4 warps of 64x64", true},
  {"tensorcore_tf32_128x256x32", "tensorcore_tf32", Family::TensorCore, 256, 128, 256, 32, 256, 4, kF32, 80, "TF32 mma.sync m16n8k8 (needs precision 'high'), BK=32, 4-stage cp.async, 8 warps of 64x64", true},
  {"tensorcore_tf32_64x64x16",   "tensorcore_tf32", Family::TensorCore,  64,  64,  64, 16, 128, 4, kF32, 80, "TF32 mma.sync m16n8k8 (needs precision 'high'), 4-stage cp.async, 4 warps of 32x32", true},
  // hopper: wgmma + TMA (sm_90a builds, compute capability 9.0 only). 3 warpgroups: one producer thread
  // issuing TMA copies into a ring of 128-byte-swizzled stages (4 x 48 KB for 128x256, 6 x 32 KB for
  // 128x128), two consumer warpgroups of 64 x BN fp32 accumulators each. pad 0: the swizzle, not padding,
  // keeps TMA writes and wgmma reads conflict-free.
  {"hopper_128x256x64",       "hopper",       Family::Hopper, 256, 128, 256, 64, 384, 0, kF16 | kBF16, 90, "wgmma m64n256k16 (fp32 acc) + TMA, 128B swizzle, 4-stage mbarrier ring, producer + 2 consumer warpgroups"},
  {"hopper_128x128x64",       "hopper",       Family::Hopper, 128, 128, 128, 64, 384, 0, kF16 | kBF16, 90, "wgmma m64n128k16 (fp32 acc) + TMA, 128B swizzle, 6-stage mbarrier ring, producer + 2 consumer warpgroups"},
  // TF32: the same kernel with 32 fp32 elements (128 bytes) of K per stage; wgmma reads tf32 only K-major,
  // so a column-major A / row-major B is copied transposed first.
  {"hopper_tf32_128x256x32",  "hopper_tf32",  Family::Hopper, 256, 128, 256, 32, 384, 0, kF32, 90, "TF32 wgmma m64n256k8 (needs precision 'high') + TMA, 4-stage ring, K-major operands (others copied transposed)", true},
  {"hopper_tf32_128x128x32",  "hopper_tf32",  Family::Hopper, 128, 128, 128, 32, 384, 0, kF32, 90, "TF32 wgmma m64n128k8 (needs precision 'high') + TMA, 6-stage ring, K-major operands (others copied transposed)", true},
};
// clang-format on
inline constexpr int kNumConfigs = sizeof(kConfigs) / sizeof(kConfigs[0]);

inline const KernelConfig* find_config(std::string_view name) {
  for (const auto& c : kConfigs)
    if (name == c.name) return &c;
  return nullptr;
}

// What the chooser knows about the device.
struct DeviceInfo {
  int index = 0;
  std::string name;
  int sm = 0;  // major*10 + minor
  int num_sms = 1;
  int max_threads_per_block = 1024;
};

// What the chooser knows about the problem.
struct Problem {
  int64_t M = 0, N = 0, K = 0;
  c10::ScalarType dtype = c10::ScalarType::Float;
  bool a_row_major = true;  // A's k-stride is 1
  bool b_row_major = true;  // B's n-stride is 1
  // torch.get_float32_matmul_precision() is "high" or "medium": fp32 inputs may
  // use TF32 tensor cores, as torch.mm would (at::globalContext().allowTF32CuBLAS()).
  bool allow_tf32 = false;
};

struct Choice {
  const KernelConfig* cfg = nullptr;
  std::string reason;
};

inline std::string dtype_str(c10::ScalarType t) {
  switch (t) {
    case c10::ScalarType::Float: return "torch.float32";
    case c10::ScalarType::Double: return "torch.float64";
    case c10::ScalarType::Half: return "torch.float16";
    case c10::ScalarType::BFloat16: return "torch.bfloat16";
    default: return std::string("torch.") + c10::toString(t);
  }
}

// Why a config cannot run this problem on this device, or "" if it can.
inline std::string unsupported_reason(const KernelConfig& c, const Problem& p, const DeviceInfo& d) {
  std::ostringstream os;
  if (!(c.dtypes & dtype_bit(p.dtype))) {
    os << c.name << " does not support " << dtype_str(p.dtype);
  } else if (c.threads > d.max_threads_per_block) {
    os << c.name << " needs " << c.threads << " threads per block but cuda:" << d.index << " ("
       << d.name << ") allows at most " << d.max_threads_per_block;
  } else if (d.sm < c.min_sm) {
    os << c.name << " needs compute capability " << c.min_sm / 10 << "." << c.min_sm % 10
       << " but cuda:" << d.index << " is " << d.sm / 10 << "." << d.sm % 10;
  } else if (c.family == Family::Hopper && !kBuiltForSm90a) {
    os << c.name << " is not in this build: wgmma/TMA need the sm_90a target (rebuild with "
       << "TORCH_CUDA_ARCH_LIST=9.0a, or 9.0, which setup.py builds as 9.0a)";
  } else if (c.family == Family::Hopper && d.sm != 90) {
    os << c.name << " runs only on compute capability 9.0 (H100/H200: sm_90a code) but cuda:" << d.index
       << " is " << d.sm / 10 << "." << d.sm % 10;
  } else if (c.tf32 && !p.allow_tf32) {
    os << c.name << " computes in TF32 (10-bit mantissa), which fp32 inputs may only use when "
       << "TF32 is allowed: call torch.set_float32_matmul_precision(\"high\") (or \"medium\") "
       << "first; the current precision is \"highest\" (IEEE fp32)";
  }
  return os.str();
}

inline std::string valid_variants() {
  std::string out;
  std::string_view last;
  for (const auto& c : kConfigs) {
    if (last == c.variant) continue;
    if (!out.empty()) out += ", ";
    out += "'" + std::string(c.variant) + "'";
    last = c.variant;
  }
  return out;
}

inline std::string valid_tiles(std::string_view variant) {
  std::string out;
  for (const auto& c : kConfigs) {
    if (variant != c.variant) continue;
    if (!out.empty()) out += ", ";
    out += std::to_string(c.tile);
  }
  return out;
}

// The shape heuristic: an ordered list of rules, each with the measured reason
// it exists (benchmarks/ab.py --kernels all on the GPU machine; the numbers are
// in benchmarks/results/). A rule whose config cannot run here (dtype, threads,
// compute capability) falls through to the next.
inline Choice choose(const Problem& p, const DeviceInfo& d) {
  auto pick = [&](const char* name, std::string why) -> Choice {
    const KernelConfig* c = find_config(name);
    TORCH_CHECK(c != nullptr, "tilelab: chooser names unknown config ", name);
    if (unsupported_reason(*c, p, d).empty()) return Choice{c, std::move(why)};
    return Choice{};
  };
  Choice ch;

  // --- tensor cores (tensorcore family, sm_80+): half precision, and fp32 under TF32 ---
  // Half precision always goes to the tensor cores; fp32 only when the user
  // allowed TF32 (torch.set_float32_matmul_precision("high"/"medium")), so the
  // default precision keeps IEEE fp32 on the textbook kernels below.
  // Measured on an NVIDIA H200 (benchmarks/ab.py, tensorcore rows, row-major), ms. 128x256x64
  // and the 128x128x32 column: benchmarks/results/h200-2026-11-21/tensorcore/run4/ab_half.txt
  // (bf16; fp16 within a few % of it), as is 128x256x32, the BK=32 row that 128x256x64 replaced;
  // the 64x64x32 column and the 8x4096x4096 row: run3.
  //   shape (bf16)   128x256x64  128x256x32  128x128x32  64x64x32  cuBLAS
  //   8192^3         2.82-2.90   3.06-3.09       -          5.700     1.41-1.60
  //   4096^3            0.387       0.403       0.428       0.763     0.193
  //   4097^3            0.516       0.549       0.574       0.970     1.031
  //   3072^3            0.194       0.207       0.221         -       0.082
  //   2048^3            0.051       0.053       0.058         -       0.027
  //   1536^3            0.038       0.042       0.042         -       0.016
  //   1000^3            0.029       0.030       0.026       0.020     0.011
  //   8x4096x4096         -         0.086       0.058       0.044     0.018
  //  - >= half a wave of 128x256 tiles (1536^3 has 72 on 132 SMs and still wins): 128x256x64, 8
  //    warps of 64x64; it reads 25% fewer bytes from L2 per MMA than 128x128 (ncu at 4096^3 bf16,
  //    run3: L2 throughput 69% vs 83%, tensor pipe 60% vs 53%) and BK=64 halves the barriers per K.
  //    Unless the 256-wide tiles cover > 25% more of C than 128-wide ones (N <= 128, say): the
  //    MMAs on the padding are wasted, so those shapes stay on 128x128.
  //  - at least 3/4 of a 128x128 tile per SM: 128x128 (4 warps of 64x64, 2 blocks/SM); GPT-2's
  //    grad-weight shape 2304x768x1024 (108 tiles on 132 SMs): 0.025 vs 0.028 ms for 64x64
  //    (tensorcore/run5/ab_gpt2_bf16.txt), 1000^3 (64 tiles): 0.026 vs 0.020 ms, 64x64 wins.
  //  - fewer: 64x64 (4 warps of 32x32) fills more SMs.
  //  TF32 (run4/ab_tf32.txt), ms:
  //   shape          tf32_128x256x32  tf32_128x128x16  tf32_64x64x16  cuBLAS (TF32)
  //   8192^3              7.104            7.803          12.621        3.114
  //   4096^3              0.903            1.017           1.631        0.418
  //   4097^3              1.291            1.391           1.962        1.197
  //   2048^3              0.117            0.130           0.199        0.053
  //   1536^3              0.089            0.094           0.096        0.039
  //   1000^3              0.064            0.045           0.033        0.018
  //  the same three rules as half precision.
  const bool half = p.dtype == c10::ScalarType::Half || p.dtype == c10::ScalarType::BFloat16;
  const bool tf32 = p.dtype == c10::ScalarType::Float && p.allow_tf32;
  const int64_t tiles256 = ((p.M + 127) / 128) * ((p.N + 255) / 256);
  const int64_t tiles128 = ((p.M + 127) / 128) * ((p.N + 127) / 128);
  // N rounded up to whole 256- and 128-wide tiles: how much of C each tiling covers.
  const int64_t n_pad256 = (p.N + 255) / 256 * 256, n_pad128 = (p.N + 127) / 128 * 128;
  // HOPPER_RULES_BEGIN
  // --- wgmma + TMA (hopper family): sm_90 in an sm_90a build; half precision, and fp32 under TF32 ---
  // Measured on an NVIDIA H200 (benchmarks/ab.py, row-major operands), ms. bf16 (fp16 within ~8%):
  // benchmarks/results/h200-2026-11-21/hopper/run1/ab_half.txt (squares), run2/ab_small.txt (the rest):
  //   shape           hopper_128x256x64  hopper_128x128x64  tensorcore_128x256x64  tensorcore_64x64x32  cuBLAS
  //   8192^3               1.644              1.895              3.302                  -            1.569
  //   4096^3               0.204              0.237              0.351                  -            0.174
  //   4095^3               0.328              0.351              0.469                  -            0.929
  //   2048^3               0.034              0.037              0.051                  -            0.027
  //   1536^3               0.026                -                  -                    -            0.015
  //   3072x768x1024        0.021              0.023                -                  0.036          0.013
  //   2304x768x1024        0.021              0.015                -                  0.028          0.013
  //   1024^3               0.020              0.014              0.030                0.018          0.009
  //   1024x768x50257       0.577              0.375                -                  0.655          0.618
  //   128x4096x4096          -                0.029                -                  0.047          0.018
  //   8x4096x4096            -                0.028                -                  0.043          0.018
  //   512^3                  -                0.010                -                  0.011          0.007
  //  - >= half a wave of 128x256 tiles (3072x768x1024 has 72 on 132 SMs and still wins): 128x256,
  //    with the mma.sync rows' padding exception (256-wide tiles covering > 25% more of C than 128-wide);
  //  - else 128x128 while there are at least 1/16 as many 128x128 tiles as SMs (9 on 132): it beat
  //    the mma.sync 64x64 row on every such shape of run2 (19 GPT-2, skinny and small square shapes;
  //    512^3, 16 tiles: 0.010 vs 0.011 ms);
  //  - fewer tiles: the mma.sync rules below (64x64 tiles spread further; final run, 256^3, 4 tiles:
  //    tensorcore_64x64x32 4.23 vs 3.72 TFLOP/s for hopper_128x128x64).
  // TF32 (run2/ab_tf32.txt): hopper_tf32_128x256x32 / hopper_tf32_128x128x32 / tensorcore_tf32_128x256x32
  // / cuBLAS TF32: 4096^3 0.506 / 0.563 / 0.894 / 0.343; 8192^3 4.23 / 4.15 / 7.07 / 3.09; 2048^3 0.086 /
  // 0.093 / 0.117 / 0.051; 1024^3: hopper_tf32_128x128x32 0.027 vs tensorcore_tf32_64x64x16 0.032. Those
  // times include the transposed copy of the row-major B (TF32 wgmma reads only K-major operands): the
  // hopper TF32 rows are used only while that copy (8 bytes per element moved, ~3 TB/s) stays small next
  // to the product (~250 TFLOP/s): elements copied x 1000 <= M*N*K (M >= ~1000 for a row-major B); a
  // skinny M keeps the mma.sync TF32 rows, which read either layout in place. Run2 copied with torch's
  // copy_; the tiled transpose that replaced it took 4096^3 to 0.423 ms (final run, ab_auto.txt), and
  // the final run's tf32_small.txt has the dispatcher on the fastest row for 8x4096x4096 (mma.sync
  // 0.082 ms), 128x4096x4096, 512^3, 1000^3, 1024x768x3072, 2304x768x1024 and 4096^3.
  const double tf32_copied = (p.a_row_major ? 0.0 : static_cast<double>(p.M) * p.K) +
                             (p.b_row_major ? static_cast<double>(p.K) * p.N : 0.0);
  const bool tf32_hopper = tf32 && tf32_copied * 1000.0 <= static_cast<double>(p.M) * p.N * p.K;
  if (half || tf32_hopper) {
    if (2 * tiles256 >= static_cast<int64_t>(d.num_sms) && 4 * n_pad256 <= 5 * n_pad128) {
      ch = pick(half ? "hopper_128x256x64" : "hopper_tf32_128x256x32",
                "sm_90, >= half a wave of 128x256 tiles: wgmma + TMA (H200: bf16 4096^3 0.204 ms vs 0.237 "
                "for hopper_128x128x64 and 0.351 for tensorcore_128x256x64; 8192^3 1.644 vs 1.895 and 3.302; "
                "TF32 4096^3 0.506 vs 0.563 and 0.894 for tensorcore_tf32_128x256x32)");
      if (ch.cfg) return ch;
    }
    if (16 * tiles128 >= static_cast<int64_t>(d.num_sms)) {
      ch = pick(half ? "hopper_128x128x64" : "hopper_tf32_128x128x32",
                "sm_90, fewer than half a wave of 128x256 tiles: wgmma + TMA with 128x128 tiles (H200: bf16 "
                "1024^3 0.014 ms vs 0.018 for tensorcore_64x64x32, 8x4096x4096 0.028 vs 0.043, 2304x768x1024 "
                "0.015 vs 0.021 for hopper_128x256x64; TF32 1024^3 0.027 vs 0.032 for tensorcore_tf32_64x64x16)");
      if (ch.cfg) return ch;
    }
  }
  // HOPPER_RULES_END
  if (half || tf32) {
    if (2 * tiles256 >= static_cast<int64_t>(d.num_sms) && 4 * n_pad256 <= 5 * n_pad128) {
      ch = pick(half ? "tensorcore_128x256x64" : "tensorcore_tf32_128x256x32",
                "tensor cores, >= half a wave of 128x256 tiles: 25% fewer L2 bytes per MMA than 128x128, "
                "128 bytes of K per stage (measured on an H200 against 128x128: bf16 4096^3 0.387 vs 0.428 "
                "ms, 2048^3 0.051 vs 0.058, 1536^3 0.038 vs 0.042; TF32 4096^3 0.903 vs 1.017 ms, 8192^3 "
                "7.10 vs 7.80, 1536^3 0.089 vs 0.094)");
      if (ch.cfg) return ch;
    }
    if (4 * tiles128 >= 3 * static_cast<int64_t>(d.num_sms)) {
      ch = pick(half ? "tensorcore_128x128x32" : "tensorcore_tf32_128x128x16",
                "tensor cores, at least 3/4 of a 128x128 tile per SM: 64x64 warp tiles, 2 blocks/SM "
                "(measured bf16 4096^3 0.419 vs 0.763 ms, 2304x768x1024 (108 tiles) 0.025 vs 0.028 ms, "
                "TF32 4096^3 0.963 vs 1.555 ms against 64x64 blocks on an H200)");
      if (ch.cfg) return ch;
    }
    ch = pick(half ? "tensorcore_64x64x32" : "tensorcore_tf32_64x64x16",
              "tensor cores, fewer 128x128 tiles than 3/4 of the SMs: 64x64 tiles fill more SMs (measured "
              "bf16 1000^3 0.020 vs 0.026 ms, 8x4096x4096 0.044 vs 0.058 ms against 128x128, "
              "TF32 1000^3 0.040 vs 0.056 ms, on an H200)");
    if (ch.cfg) return ch;
  }

  // --- fp32: the blocked (register-tiled, cp.async-pipelined) kernels -----
  // BLOCKED_RULES_BEGIN
  // The row with the least estimated time: a block tile's work is bm*bn*K, an
  // SM gets ceil(tiles / SMs) rounds of tiles, and each row has its own
  // throughput per SM ("rate", outputs x k per SM per unit time, relative).
  // Rates from the standalone sweep on an NVIDIA H200 at 4096^3, where each
  // row runs whole rounds (benchmarks/results/h200-2026-11-21/blocked/run6/
  // call3/small/variants.txt): wide_128x256x8 2.811 ms for 4 tiles an SM,
  // 64x128x8 2.927 ms for 16, k16_64x64x16 3.280 ms for 32:
  //   rate = tiles an SM x bm x bn / ms: 46.6k, 44.8k, 40.0k -> 117 : 112 : 100.
  // The same run, ms (ours vs the estimate's pick):
  //   shape         wide_128x256x8  64x128x8  k16_64x64x16   pick
  //   512^3             0.0928       0.0312      0.0205      64x64
  //   1024^3            0.1804       0.0584      0.0636      64x128
  //   1536^3            0.2673       0.2159      0.2090      64x64
  //   2048^3            0.3571       0.3809      0.4338      wide
  //   3072^3            1.5831       1.2444      1.4166      64x128
  //   4096^3            2.8111       2.9273      3.2800      wide
  //   128x4096x4096     0.7017       0.2132      0.1316      64x64
  // The estimate picks the fastest row on each. blocked_* is fp32 only: other
  // dtypes fall through.
  if (p.dtype == c10::ScalarType::Float) {
    constexpr std::pair<const char*, int64_t> kBlockedRates[] = {
        {"blocked_wide_128x256x8", 117},
        {"blocked_64x128x8", 112},
        {"blocked_k16_64x64x16", 100},
    };
    const KernelConfig* best = nullptr;
    int64_t best_cost = 0, best_rounds = 0, best_rate = 0;
    for (const auto& [name, rate] : kBlockedRates) {
      const KernelConfig* c = pick(name, "").cfg;
      if (c == nullptr) continue;
      const int64_t tiles = ((p.M + c->bm - 1) / c->bm) * ((p.N + c->bn - 1) / c->bn);
      const int64_t rounds = (tiles + d.num_sms - 1) / d.num_sms;
      const int64_t cost = rounds * c->bm * c->bn * 1000 / rate;
      if (best == nullptr || cost < best_cost) best = c, best_cost = cost, best_rounds = rounds, best_rate = rate;
    }
    if (best != nullptr) {
      std::ostringstream why;
      why << "fp32: the least estimated time of the blocked rows: " << best_rounds << " round(s) of " << best->bm
          << "x" << best->bn << " tiles on " << d.num_sms << " SMs at relative rate " << best_rate
          << " (rates measured on an H200, blocked/run6)";
      return Choice{best, why.str()};
    }
  }
  // BLOCKED_RULES_END

  // --- textbook kernels (naive / tiled / padded), every dtype --------------
  // Measured on an NVIDIA H200 (benchmarks/ab.py --kernels all, fp32 and bf16,
  // row-major operands; benchmarks/results/):
  //  - tiled beats padded by ~20% for row-major A (4096^3 fp32: tiled_32 16.4 ms,
  //    padded_32 20.6 ms): tiled reads its A row As[ty][k..k+3] as one 16-byte
  //    shared load, the k-major padded tile needs a scalar load per k.
  //  - padded (kPad=1) beats padded_nopad by 25% (20.6 vs 27.5 ms at 4096^3):
  //    the bank conflicts of the transposed store, measured in benchmarks/.
  //  - T=32 wins when the 32x32 grid has no ragged edge and at least one block
  //    per SM (512^3: 0.041 ms vs 0.047 for T=16; 4096^3: 16.4 vs 16.9 ms);
  //    otherwise T=16 wins or ties (1000^3: 0.279 vs 0.284 ms; 333x777x555:
  //    0.053 vs 0.065 ms; 8x4096x4096: 0.207 vs 0.216 ms; 4097^3 is 1% slower).
  //  Column-major A was not part of this sweep: the same rule applies to it.
  const int64_t tiles32 = ((p.M + 31) / 32) * ((p.N + 31) / 32);
  const bool even32 = p.M % 32 == 0 && p.N % 32 == 0;
  if (even32 && tiles32 >= d.num_sms) {
    ch = pick("tiled_32x32x32",
              "M and N multiples of 32 with at least one 32x32 tile per SM: the 32x32 tile "
              "halves global traffic against 16x16 (measured 16.4 vs 16.9 ms at 4096^3 fp32, "
              "0.041 vs 0.047 ms at 512^3 on an H200)");
    if (ch.cfg) return ch;
  }
  ch = pick("tiled_16x16x16",
            "a ragged 32x32 grid or fewer 32x32 tiles than SMs: 16x16 tiles waste less at "
            "the edges and fill more SMs (measured 0.053 vs 0.065 ms at 333x777x555, 0.279 vs "
            "0.284 ms at 1000^3 fp32 on an H200)");
  if (ch.cfg) return ch;
  ch = pick("tiled_8x8x8", "last resort: the smallest tiled config fits any device");
  if (ch.cfg) return ch;
  TORCH_CHECK(false, "tilelab: no kernel for ", dtype_str(p.dtype), " ", p.M, "x", p.N, "x", p.K,
              " on cuda:", d.index, " (", d.name, ", sm_", d.sm, ")");
}

// Resolve (variant, tile) to a config: the user's override, validated against
// the table, or the chooser's pick when both are None.
inline Choice select_kernel(const Problem& p, const DeviceInfo& d,
                            std::optional<std::string_view> variant, std::optional<int64_t> tile) {
  if (!variant.has_value() || *variant == "auto") {
    TORCH_CHECK(!tile.has_value(),
                "tilelab: tile=", *tile, " needs a variant; pass variant= too (one of ",
                valid_variants(), ")");
    return choose(p, d);
  }
  const std::string v(*variant);
  // A full config name ("tiled_16x16x16") selects that row directly.
  const KernelConfig* c = find_config(v);
  if (c != nullptr) {
    TORCH_CHECK(!tile.has_value() || *tile == c->tile, "tilelab: variant='", v,
                "' is a config name with tile ", c->tile, "; tile=", *tile, " contradicts it");
  } else {
    bool known = false;
    for (const auto& row : kConfigs) known = known || v == row.variant;
    TORCH_CHECK(known, "tilelab: unknown variant '", v, "'; valid variants: ", valid_variants(),
                " (or a config name from tilelab_torch.kernels())");
    if (!tile.has_value()) {
      // The variant without a tile: the largest of its tiles that runs here.
      std::string why_not;  // the reason of the variant's last row, if none runs
      for (const auto& row : kConfigs) {
        if (v != row.variant) continue;
        const std::string r = unsupported_reason(row, p, d);
        if (r.empty() && (c == nullptr || row.tile > c->tile)) c = &row;
        if (!r.empty()) why_not = r;
      }
      TORCH_CHECK(c != nullptr, "tilelab: no config of variant '", v, "' runs ",
                  dtype_str(p.dtype), " on cuda:", d.index, " (", d.name, "): ", why_not);
      return Choice{c, "user override: variant='" + v + "', largest tile that runs here"};
    }
    for (const auto& row : kConfigs)
      if (v == row.variant && row.tile == *tile) c = &row;
    if (c == nullptr) {
      const int64_t t = *tile;
      if (t > 0 && t * t > d.max_threads_per_block) {
        TORCH_CHECK(false, "tilelab: tile=", t, " needs ", t, "x", t, " = ", t * t,
                    " threads per block (one thread per output of the tile) but cuda:", d.index,
                    " (", d.name, ") allows at most ", d.max_threads_per_block,
                    "; valid tiles for variant '", v, "': ", valid_tiles(v));
      }
      TORCH_CHECK(false, "tilelab: tile=", t, " is not a valid tile for variant '", v,
                  "'; valid tiles: ", valid_tiles(v));
    }
  }
  const std::string why = unsupported_reason(*c, p, d);
  TORCH_CHECK(why.empty(), "tilelab: ", why);
  return Choice{c, std::string("user override: ") + c->name};
}

}  // namespace tilelab
