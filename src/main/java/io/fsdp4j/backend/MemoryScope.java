package io.fsdp4j.backend;

/**
 * A group of device buffers with one lifetime. While a scope is entered on a thread, every tensor the backend
 * allocates on that thread belongs to it; closing the scope frees them all. Scopes nest: leaving one returns
 * allocations to the scope entered before it. The FSDP engine gives each block's forward activations, each
 * backward, and each gathered unit a scope of its own, so device memory is bounded without the model code
 * freeing anything. On the CPU backend a closed scope's arrays go to a pool that later allocations reuse
 * ({@code backend.cpu.CpuMemory}); outside every scope the garbage collector frees memory.
 */
public interface MemoryScope extends AutoCloseable {

    /** Makes this scope receive the current thread's allocations until the returned handle is closed. */
    Entered enter();

    /** Frees every tensor allocated in this scope. */
    @Override
    void close();

    /** The period during which a scope receives allocations. */
    interface Entered extends AutoCloseable {
        @Override
        void close();
    }

    /** A scope that owns nothing (for backends whose memory is garbage collected). */
    MemoryScope NONE = new MemoryScope() {
        @Override
        public Entered enter() {
            return () -> { };
        }

        @Override
        public void close() {
        }
    };
}
