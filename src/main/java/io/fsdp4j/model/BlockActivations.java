package io.fsdp4j.model;

/**
 * What a decoder block's forward saves for its backward: a record of each model's own (its fields documented
 * there). The FSDP engine only keeps it and reads the block's output.
 */
public sealed interface BlockActivations permits LlamaBlock.Activations, BloomModel.Activations {

    /** (N,C) block output, the next block's input. */
    io.fsdp4j.tensor.Tensor output();

    /** Every tensor held (a field left null by selective checkpointing is not one), for accounting. */
    java.util.List<io.fsdp4j.tensor.Tensor> tensors();
}
