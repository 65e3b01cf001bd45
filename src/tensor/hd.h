// KDA_HD marks header-only functions that CUDA code may call on the device as well as the host.
#pragma once

#if defined(__CUDACC__)
#define KDA_HD __host__ __device__
#else
#define KDA_HD
#endif

// For the few hot functions whose callers are compiled for several CPU targets (generate.cc's FMA dispatch):
// inlining makes the caller's target apply to them.
#if defined(__CUDACC__)
#define KDA_HD_FORCEINLINE __host__ __device__ __forceinline__
#elif defined(__GNUC__)
#define KDA_HD_FORCEINLINE inline __attribute__((always_inline))
#else
#define KDA_HD_FORCEINLINE inline
#endif
