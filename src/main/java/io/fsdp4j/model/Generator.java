package io.fsdp4j.model;

import java.util.Arrays;

/** Greedy decoding with a KV cache: the prompt is processed once, then one new token per step. */
public final class Generator {
    private Generator() {}

    /**
     * The tokens generated after {@code prompt}: at most {@code maxNewTokens}, stopping after any token of
     * {@code stopTokens} (which is included).
     */
    public static int[] greedy(SingleDeviceModel model, int[] prompt, int maxNewTokens, int... stopTokens) {
        CausalLM lm = model.model();
        KvCache cache = lm.newKvCache(prompt.length + maxNewTokens);
        int[] generated = new int[maxNewTokens];
        int count = 0, position = 0;
        int[] next = prompt;
        while (count < maxNewTokens) {
            float[] logits = lm.nextTokenLogits(model.params(), cache, next, position);
            position += next.length;
            int token = argmax(logits);
            generated[count++] = token;
            if (Arrays.stream(stopTokens).anyMatch(s -> s == token)) {
                break;
            }
            next = new int[] {token};
        }
        return Arrays.copyOf(generated, count);
    }

    /** Index of the largest value; the first one on ties. */
    public static int argmax(float[] values) {
        int best = 0;
        for (int i = 1; i < values.length; i++) {
            if (values[i] > values[best]) {
                best = i;
            }
        }
        return best;
    }
}
