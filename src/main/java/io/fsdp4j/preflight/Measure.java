package io.fsdp4j.preflight;

/**
 * A rate a node measured at the start of the job (its slowest GPU's matrix-product rate, say), compared with the
 * other nodes': a node below {@link Comparison#SLOW} of the nodes' median stops the job, named (or, with
 * {@code dist.exclude_unhealthy}, is left out of it).
 *
 * @param key   what is measured, unique in a node's measures
 * @param what  how messages name it ("bf16 product rate of the slowest GPU")
 * @param value the rate, in {@code unit}
 * @param unit  "TFLOP/s", "TB/s"
 */
public record Measure(String key, String what, double value, String unit) {}
