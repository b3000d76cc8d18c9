package io.fsdp4j.model;

import java.util.Arrays;
import java.util.stream.Collectors;

/**
 * How a model's rotary embedding frequencies are scaled (transformers' {@code rope_parameters} /
 * {@code rope_scaling}); {@link RopeTable} applies it. The fields a type does not use are 0.
 *
 * @param type which scaling
 * @param factor the scaling factor (linear, dynamic, llama3)
 * @param lowFreqFactor llama3's low_freq_factor
 * @param highFreqFactor llama3's high_freq_factor
 * @param originalMaxPositions llama3's original_max_position_embeddings
 */
public record RopeScaling(Type type, double factor, double lowFreqFactor, double highFreqFactor,
                          int originalMaxPositions) {

    /** The supported {@code rope_type}s, by their name in config.json. */
    public enum Type {
        /** Plain rotary embedding: inv_freq_j = theta^(-2j/HS). */
        DEFAULT("default"),
        /** Every frequency divided by the factor (position interpolation). */
        LINEAR("linear"),
        /** NTK-aware: the base grows with the sequence length past max_position_embeddings (see {@link RopeTable}). */
        DYNAMIC("dynamic"),
        /** Llama 3.1: low frequencies divided by the factor, high ones kept, the band between interpolated. */
        LLAMA3("llama3");

        private final String hfName;

        Type(String hfName) {
            this.hfName = hfName;
        }

        public String hfName() {
            return hfName;
        }

        public static Type fromHfName(String name) {
            for (Type t : values()) {
                if (t.hfName.equals(name)) {
                    return t;
                }
            }
            return null;
        }

        public static String supportedNames() {
            return Arrays.stream(values()).map(Type::hfName).collect(Collectors.joining(", "));
        }
    }

    /** No scaling. */
    public static final RopeScaling NONE = new RopeScaling(Type.DEFAULT, 1.0, 0, 0, 0);

    public RopeScaling {
        require(type != null, "rope_type must be given");
        switch (type) {
            case DEFAULT -> { }
            case LINEAR, DYNAMIC -> require(factor > 0, "rope factor must be positive, got " + factor);
            case LLAMA3 -> {
                require(factor > 0, "rope factor must be positive, got " + factor);
                require(lowFreqFactor > 0 && highFreqFactor > lowFreqFactor,
                        "llama3 rope needs 0 < low_freq_factor < high_freq_factor, got " + lowFreqFactor + " and "
                                + highFreqFactor);
                require(originalMaxPositions > 0, "llama3 rope needs a positive original_max_position_embeddings");
            }
        }
    }

    private static void require(boolean ok, String message) {
        if (!ok) {
            throw new io.fsdp4j.UserError("model config: " + message);
        }
    }

    public static RopeScaling linear(double factor) {
        return new RopeScaling(Type.LINEAR, factor, 0, 0, 0);
    }

    public static RopeScaling dynamic(double factor) {
        return new RopeScaling(Type.DYNAMIC, factor, 0, 0, 0);
    }

    public static RopeScaling llama3(double factor, double lowFreqFactor, double highFreqFactor,
                                     int originalMaxPositions) {
        return new RopeScaling(Type.LLAMA3, factor, lowFreqFactor, highFreqFactor, originalMaxPositions);
    }
}
