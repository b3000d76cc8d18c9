package io.fsdp4j.preflight;

/**
 * One thing a node states about its run, compared across the nodes of a job.
 *
 * @param key      what is compared, unique in a node's facts ({@code model.weights/model.safetensors})
 * @param what     how messages name it ("model weights (model.safetensors)")
 * @param plural   whether {@code what} takes "differ" rather than "differs"
 * @param value    the node's value; nodes agree when the values are equal strings
 * @param hint     what to check on a node that differs; {@value #THOSE_NODES} is replaced by "that node" or "those
 *                 nodes"
 * @param required whether a difference stops the job (else it is only reported)
 */
public record Fact(String key, String what, boolean plural, String value, String hint, boolean required) {
    static final String THOSE_NODES = "{nodes}";

    public Fact {
        if (key == null || what == null || value == null || hint == null) {
            throw new IllegalArgumentException("a fact needs a key, a name, a value and a hint");
        }
    }

    /** A fact whose difference stops the job. */
    static Fact enforced(String key, String what, String value, String hint) {
        return new Fact(key, what, false, value, hint, true);
    }

    /** A fact whose difference is only reported. */
    static Fact advisory(String key, String what, String value, String hint) {
        return new Fact(key, what, false, value, hint, false);
    }

    Fact pluralName() {
        return new Fact(key, what, true, value, hint, required);
    }

    /** {@code value} for messages: long hex digests cut to their first 8 digits. */
    static String shown(String value) {
        return value.replaceAll("\\b([0-9a-f]{8})[0-9a-f]{24,}\\b", "$1..");
    }
}
