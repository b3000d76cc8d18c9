package io.fsdp4j.model;

/**
 * Cosines and sines of the default rotary embedding, (P, HS/2): angle = p / theta^(2j/HS), computed in double
 * and rounded once to fp32 (Hugging Face computes the angle in fp32; the difference is below fp32's precision
 * in the result for the positions of a training sequence).
 */
public record RopeTable(float[] cos, float[] sin, int positions, int half) {

    public static RopeTable of(ModelConfig config, int positions) {
        int dim = config.headDim(), half = dim / 2;
        double[] invFreq = new double[half];
        for (int j = 0; j < half; j++) {
            invFreq[j] = 1.0 / Math.pow(config.ropeTheta(), (2.0 * j) / dim);
        }
        float[] cos = new float[positions * half], sin = new float[positions * half];
        for (int p = 0; p < positions; p++) {
            for (int j = 0; j < half; j++) {
                double angle = p * invFreq[j];
                cos[p * half + j] = (float) Math.cos(angle);
                sin[p * half + j] = (float) Math.sin(angle);
            }
        }
        return new RopeTable(cos, sin, positions, half);
    }
}
