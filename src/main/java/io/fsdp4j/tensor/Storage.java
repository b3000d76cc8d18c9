package io.fsdp4j.tensor;

/** The memory behind a tensor; each backend has its own kinds. Sizes are in elements. */
public interface Storage {
    long capacity();
}
