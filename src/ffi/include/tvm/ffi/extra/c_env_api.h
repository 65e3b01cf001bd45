/* The environment a tvm-ffi function reads during a call (kda's subset): the stream to launch on.
 * kda-runner answers with the harness stream of the device the arguments live on. */
#ifndef KDA_TVM_FFI_EXTRA_C_ENV_API_H_
#define KDA_TVM_FFI_EXTRA_C_ENV_API_H_

#include <tvm/ffi/c_api.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The stream of (device_type, device_id) for the current call: kda's harness stream for the CUDA
 * device the tensors are on, NULL on the CPU. */
TVMFFIStreamHandle TVMFFIEnvGetStream(int32_t device_type, int32_t device_id);

#ifdef __cplusplus
}
#endif

#endif /* KDA_TVM_FFI_EXTRA_C_ENV_API_H_ */
