package io.fsdp4j.model;

import java.util.List;

/**
 * Cosines and sines of the rotary embedding, (P, HS/2): angle = p * inv_freq_j, with inv_freq from the config's
 * base theta and {@link RopeScaling}, computed in double and rounded once to fp32 (Hugging Face computes the
 * frequencies and angles in fp32; the difference is below fp32's precision in the result for the positions of a
 * training sequence). Scaling rules, as transformers' modeling_rope_utils:
 * <ul>
 *   <li>default: inv_freq_j = theta^(-2j/HS);</li>
 *   <li>linear: default / factor;</li>
 *   <li>llama3: with wavelength w = 2 pi / inv_freq, L = original_max_position_embeddings: w &lt; L/high_freq_factor
 *   keeps inv_freq; w &gt; L/low_freq_factor divides it by factor; between, (1 - s) inv_freq / factor + s inv_freq
 *   with s = (L / w - low_freq_factor) / (high_freq_factor - low_freq_factor);</li>
 *   <li>dynamic (NTK-aware): for a sequence of S tokens, S' = max(S, max_position_embeddings) and the base becomes
 *   theta * (factor * S' / max_position_embeddings - (factor - 1))^(HS / (HS - 2)). transformers recomputes it from
 *   the longest position seen at run time; for any sequence within max_position_embeddings the base is theta
 *   itself, so training and scoring use the default frequencies. Longer sequences are refused ({@link LlamaModel}
 *   says why): transformers would rescale every position of such a batch to its length.</li>
 * </ul>
 * <ul>
 *   <li>longrope (Phi-3): inv_freq_j = theta^(-2j/HS) / ext_j, ext the short factors for a sequence of at most
 *   original_max_position_embeddings tokens and the long ones beyond (transformers chooses by the longest position
 *   of the batch); cos and sin multiplied by the attention factor.</li>
 * </ul>
 * No other scaling here changes cos and sin (transformers' attention_factor is 1 for them).
 */
public record RopeTable(float[] cos, float[] sin, int positions, int half) {

    /** The table for positions 0..positions-1, for sequences of up to {@code positions} tokens. */
    public static RopeTable of(ModelConfig config, int positions) {
        return of(config, positions, positions);
    }

    /** The table for positions 0..positions-1 with the frequencies of a sequence of {@code seqLen} tokens. */
    public static RopeTable of(ModelConfig config, int positions, int seqLen) {
        int half = config.headDim() / 2;
        double[] invFreq = inverseFrequencies(config, seqLen);
        RopeScaling s = config.ropeScaling();
        double attention = s.type() == RopeScaling.Type.LONGROPE ? s.attentionFactor() : 1.0;
        float[] cos = new float[positions * half], sin = new float[positions * half];
        for (int p = 0; p < positions; p++) {
            for (int j = 0; j < half; j++) {
                double angle = p * invFreq[j];
                cos[p * half + j] = (float) (Math.cos(angle) * attention);
                sin[p * half + j] = (float) (Math.sin(angle) * attention);
            }
        }
        return new RopeTable(cos, sin, positions, half);
    }

    /** inv_freq (HS/2) of the config's rope for a sequence of {@code seqLen} tokens (seqLen matters only for dynamic). */
    public static double[] inverseFrequencies(ModelConfig config, int seqLen) {
        int dim = config.headDim(), half = dim / 2;
        RopeScaling s = config.ropeScaling();
        double base = config.ropeTheta();
        if (s.type() == RopeScaling.Type.DYNAMIC) {
            double maxPos = config.maxPositions(), len = Math.max(seqLen, config.maxPositions());
            base *= Math.pow(s.factor() * len / maxPos - (s.factor() - 1), dim / (dim - 2.0));
        }
        double[] invFreq = new double[half];
        for (int j = 0; j < half; j++) {
            invFreq[j] = 1.0 / Math.pow(base, (2.0 * j) / dim);
        }
        switch (s.type()) {
            case DEFAULT, DYNAMIC -> { }
            case LONGROPE -> {
                List<Double> ext = seqLen > s.originalMaxPositions() ? s.longFactor() : s.shortFactor();
                if (ext.size() != half) {
                    throw new io.fsdp4j.UserError("model config: longrope factors have " + ext.size()
                            + " values for a head size of " + dim + " (they need " + half + ")");
                }
                for (int j = 0; j < half; j++) {
                    invFreq[j] /= ext.get(j);
                }
            }
            case LINEAR -> {
                for (int j = 0; j < half; j++) {
                    invFreq[j] /= s.factor();
                }
            }
            case LLAMA3 -> {
                double lowWavelen = s.originalMaxPositions() / s.lowFreqFactor();
                double highWavelen = s.originalMaxPositions() / s.highFreqFactor();
                for (int j = 0; j < half; j++) {
                    double wavelen = 2 * Math.PI / invFreq[j];
                    if (wavelen > lowWavelen) {
                        invFreq[j] /= s.factor();
                    } else if (wavelen >= highWavelen) {
                        double smooth = (s.originalMaxPositions() / wavelen - s.lowFreqFactor())
                                / (s.highFreqFactor() - s.lowFreqFactor());
                        invFreq[j] = (1 - smooth) * invFreq[j] / s.factor() + smooth * invFreq[j];
                    }
                }
            }
        }
        return invFreq;
    }
}
