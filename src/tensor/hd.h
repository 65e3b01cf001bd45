// KDA_HD marks header-only functions that CUDA code may call on the device as well as the host.
#pragma once

#if defined(__CUDACC__)
#define KDA_HD __host__ __device__
#else
#define KDA_HD
#endif
