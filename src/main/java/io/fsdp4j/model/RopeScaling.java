package io.fsdp4j.model;

import java.util.Arrays;
import java.util.List;
import java.util.stream.Collectors;

/**
 * How a model's rotary embedding frequencies are scaled (transformers' {@code rope_parameters} /
 * {@code rope_scaling}); {@link RopeTable} applies it. The fields a type does not use are 0.
 *
 * @param type which scaling
 * @param factor the scaling factor (linear, dynamic, llama3)
 * @param lowFreqFactor llama3's low_freq_factor
 * @param highFreqFactor llama3's high_freq_factor
 * @param originalMaxPositions llama3's and longrope's original_max_position_embeddings
 * @param shortFactor longrope's short_factor (HS/2 values; null for the other types)
 * @param longFactor longrope's long_factor (HS/2 values; null for the other types)
 * @param attentionFactor longrope's attention_factor, which multiplies cos and sin (0 for the other types)
 */
public record RopeScaling(Type type, double factor, double lowFreqFactor, double highFreqFactor,
                          int originalMaxPositions, List<Double> shortFactor, List<Double> longFactor,
                          double attentionFactor) {

    /** The supported {@code rope_type}s, by their name in config.json. */
    public enum Type {
        /** Plain rotary embedding: inv_freq_j = theta^(-2j/HS). */
        DEFAULT("default"),
        /** Every frequency divided by the factor (position interpolation). */
        LINEAR("linear"),
        /** NTK-aware: the base grows with the sequence length past max_position_embeddings (see {@link RopeTable}). */
        DYNAMIC("dynamic"),
        /** Llama 3.1: low frequencies divided by the factor, high ones kept, the band between interpolated. */
        LLAMA3("llama3"),
        /**
         * Phi-3's long-context variants (also spelled su): inv_freq_j = theta^(-2j/HS) / ext_j with ext the short
         * factors for sequences of at most original_max_position_embeddings tokens, the long ones beyond; cos and sin
         * times the attention factor.
         */
        LONGROPE("longrope");

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

    /** A scaling of a type other than longrope. */
    public RopeScaling(Type type, double factor, double lowFreqFactor, double highFreqFactor, int originalMaxPositions) {
        this(type, factor, lowFreqFactor, highFreqFactor, originalMaxPositions, null, null, 0);
    }

    public RopeScaling {
        shortFactor = shortFactor == null ? null : List.copyOf(shortFactor);
        longFactor = longFactor == null ? null : List.copyOf(longFactor);
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
            case LONGROPE -> {
                require(shortFactor != null && longFactor != null && shortFactor.size() == longFactor.size(),
                        "longrope needs short_factor and long_factor of equal length");
                require(originalMaxPositions > 0, "longrope needs a positive original_max_position_embeddings");
                require(attentionFactor > 0, "longrope's attention_factor must be positive");
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

    /**
     * LongRoPE with transformers' default attention factor when {@code attentionFactor} is 0:
     * sqrt(1 + ln(factor) / ln(original)) for factor = max_position_embeddings / original &gt; 1, else 1.
     */
    public static RopeScaling longrope(List<Double> shortFactor, List<Double> longFactor, int originalMaxPositions,
                                       int maxPositions, double factor, double attentionFactor) {
        if (factor <= 0) {
            factor = (double) maxPositions / originalMaxPositions;
        }
        if (attentionFactor <= 0) {
            attentionFactor = factor <= 1 ? 1.0 : Math.sqrt(1 + Math.log(factor) / Math.log(originalMaxPositions));
        }
        return new RopeScaling(Type.LONGROPE, factor, 0, 0, originalMaxPositions, shortFactor, longFactor,
                attentionFactor);
    }

    public static RopeScaling llama3(double factor, double lowFreqFactor, double highFreqFactor,
                                     int originalMaxPositions) {
        return new RopeScaling(Type.LLAMA3, factor, lowFreqFactor, highFreqFactor, originalMaxPositions);
    }
}
