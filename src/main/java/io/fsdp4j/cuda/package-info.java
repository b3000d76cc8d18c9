/**
 * Everything CUDA but the backend's face: hand-written {@code java.lang.foreign} downcalls into the CUDA runtime and
 * driver, NVRTC, cuBLASLt, NCCL, NVML and cuDNN's graph API (optional: {@link io.fsdp4j.cuda.CudnnAttention}, the
 * second attention engine), found on a search path by {@link io.fsdp4j.cuda.NativeLibraries}; and
 * fsdp4j's own kernels ({@link io.fsdp4j.cuda.CudaKernels}, sources under {@code src/main/resources/kernels}).
 * {@link io.fsdp4j.backend.CudaBackend}, the {@code Backend} made of these, stands beside the CPU backend in
 * {@code backend} (the sealed interface's permitted classes share its package); nothing here imports it.
 *
 * <p>Conventions, for every class here:
 * <ul>
 *   <li>Device pointers and opaque handles (streams, events, communicators, modules) are {@code long} addresses;
 *       host memory is a {@link java.lang.foreign.MemorySegment}. Stream {@code 0} is the legacy default stream.</li>
 *   <li>Every status is checked: a failure is a {@link io.fsdp4j.cuda.CudaException} naming the function and the
 *       library's own error string. A library that cannot be found is a {@link io.fsdp4j.UserError} (one line).</li>
 *   <li>The current device is per host thread ({@link io.fsdp4j.cuda.Cuda#setDevice}): a rank's thread sets its
 *       device once, before any other call; allocations, modules, cuBLASLt handles and communicators belong to
 *       the device that was current when they were made. {@code cudaSetDevice} also makes the device's primary
 *       context current, which the driver-API calls (module loading, kernel launches) use.</li>
 *   <li>Libraries load lazily, at the first call of one of their functions; {@link
 *       io.fsdp4j.cuda.NativeLibraries#cudaAvailable()} never throws and needs no GPU.</li>
 * </ul>
 * The JVM must run with {@code --enable-native-access=ALL-UNNAMED} (the jar's manifest says so too).
 *
 * <p>May use: report (an op's timings, {@code report.StepProfile}), config, tensor, safetensors; never backend
 * (whose {@code CudaBackend} uses it) or anything above.
 */
package io.fsdp4j.cuda;
