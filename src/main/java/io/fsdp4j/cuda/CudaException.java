package io.fsdp4j.cuda;

/**
 * A native call returned a failure status. The message names the function, the library's error string and the
 * numeric status, e.g. {@code cudaMalloc: out of memory (cudaErrorMemoryAllocation = 2)}.
 */
public final class CudaException extends RuntimeException {
    private final String function;
    private final int status;

    public CudaException(String function, int status, String message) {
        super(function + ": " + message);
        this.function = function;
        this.status = status;
    }

    /** The native function that failed, e.g. {@code cudaMalloc}. */
    public String function() {
        return function;
    }

    /** The library's status code (cudaError_t, CUresult, cublasStatus_t, nvrtcResult or ncclResult_t). */
    public int status() {
        return status;
    }
}
