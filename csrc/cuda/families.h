#pragma once
// The kernel families, in one list. Everything that enumerates families is
// generated from TILELAB_FAMILIES: the Family enum, family_name(), whether this
// build compiled the family, and (launch.h) each family's launcher and
// capability check and the launch switch. A new family is one line here plus
// its own files (kernels/<family>.cuh, launch_<family>.cu) and its table rows.
//
// Host-only C++: the CPU-only build includes it too (kernels() lists the table).

namespace tilelab {

// Whether this build carries sm_90a device code (TORCH_CUDA_ARCH_LIST with
// "9.0a"; setup.py builds a plain "9.0" as "9.0a"): wgmma, TMA and setmaxnreg
// exist only there.
#ifdef TILELAB_SM90A
inline constexpr bool kBuiltForSm90a = true;
#else
inline constexpr bool kBuiltForSm90a = false;
#endif

#ifdef TILELAB_WITH_CUDA
inline constexpr bool kBuiltWithCuda = true;
#else
inline constexpr bool kBuiltWithCuda = false;
#endif

// X(Enum, name, compiled-in-this-build), from the textbook to the fast ones.
#define TILELAB_FAMILIES(X)               \
  X(Naive, naive, kBuiltWithCuda)         \
  X(Tiled, tiled, kBuiltWithCuda)         \
  X(Padded, padded, kBuiltWithCuda)       \
  X(Blocked, blocked, kBuiltWithCuda)     \
  X(TensorCore, tensorcore, kBuiltWithCuda) \
  X(Hopper, hopper, kBuiltWithCuda && kBuiltForSm90a) \
  X(Gemv, gemv, kBuiltWithCuda)           \
  X(GemvMma, gemv_mma, kBuiltWithCuda)    \
  X(GemvSplit, gemv_split, kBuiltWithCuda)

#define TILELAB_FAMILY_ENUM(E, n, c) E,
enum class Family : int { TILELAB_FAMILIES(TILELAB_FAMILY_ENUM) };
#undef TILELAB_FAMILY_ENUM

inline const char* family_name(Family f) {
#define TILELAB_FAMILY_NAME(E, n, c) \
  if (f == Family::E) return #n;
  TILELAB_FAMILIES(TILELAB_FAMILY_NAME)
#undef TILELAB_FAMILY_NAME
  return "?";
}

// Whether this build contains the family's kernels.
constexpr bool family_compiled(Family f) {
#define TILELAB_FAMILY_COMPILED(E, n, c) \
  if (f == Family::E) return c;
  TILELAB_FAMILIES(TILELAB_FAMILY_COMPILED)
#undef TILELAB_FAMILY_COMPILED
  return false;
}

}  // namespace tilelab
