package io.fsdp4j.backend;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.util.Map;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.Test;

/**
 * The dynamic shared memory {@link CudaAttentionKernels} launches attention_sm90.cu's kernels with is what the file's
 * own macros give for the stages its kernels are instantiated with (no GPU needed): a kernel launched with less
 * would read and write past its allocation. Read from the kernel source on the classpath, the macros evaluated here.
 */
class HopperSharedMemoryTest {
    private static String source() throws IOException {
        try (InputStream in = HopperSharedMemoryTest.class.getResourceAsStream("/kernels/attention_sm90.cu")) {
            assertThat(in).as("attention_sm90.cu on the classpath").isNotNull();
            return new String(in.readAllBytes(), StandardCharsets.UTF_8);
        }
    }

    /** The body of {@code #define NAME(HS, STAGES) body} (one line). */
    private static String macro(String source, String name) {
        Matcher m = Pattern.compile("#define " + name + "\\(HS, STAGES\\) (.+)").matcher(source);
        assertThat(m.find()).as("#define " + name).isTrue();
        return m.group(1).trim();
    }

    private static int constant(String source, String name) {
        Matcher m = Pattern.compile("#define " + name + " (\\d+)").matcher(source);
        assertThat(m.find()).as("#define " + name).isTrue();
        return Integer.parseInt(m.group(1));
    }

    /** The one number in {@code pattern}'s first group, found in the source. */
    private static int stages(String source, String pattern) {
        Matcher m = Pattern.compile(pattern).matcher(source);
        assertThat(m.find()).as(pattern).isTrue();
        return Integer.parseInt(m.group(1));
    }

    @Test
    void launchesGiveEachKernelTheSharedMemoryItsMacroAsks() throws IOException {
        String src = source();
        Map<String, Integer> names = Map.of("SM90_BM", constant(src, "SM90_BM"), "SM90_BN", constant(src, "SM90_BN"));
        int forwardStages = stages(src, "HOPPER_FORWARD_KERNEL\\(128, \\w+, (\\d+)\\)");
        int dkdvStages = stages(src, "sm90_backward_dkdv<H, (\\d+)[,>]");
        int dqStages = stages(src, "sm90_backward_dq<H, (\\d+)>");
        for (int hs : new int[] {64, 128}) {
            assertThat(CudaAttentionKernels.hopperForwardShared(hs)).as("forward, head size " + hs)
                    .isEqualTo(evaluate(macro(src, "SM90_SHARED"), names, hs, forwardStages));
            assertThat(CudaAttentionKernels.hopperDkdvShared(hs)).as("dk/dv, head size " + hs)
                    .isEqualTo(evaluate(macro(src, "SM90_DKDV_SHARED"), names, hs, dkdvStages));
            assertThat(CudaAttentionKernels.hopperDqShared(hs)).as("dq, head size " + hs)
                    .isEqualTo(evaluate(macro(src, "SM90_DQ_SHARED"), names, hs, dqStages));
            // what one block may have on an H100 or H200 (227 KiB)
            assertThat(CudaAttentionKernels.hopperForwardShared(hs)).isLessThanOrEqualTo(232_448);
            assertThat(CudaAttentionKernels.hopperDkdvShared(hs)).isLessThanOrEqualTo(232_448);
            assertThat(CudaAttentionKernels.hopperDqShared(hs)).isLessThanOrEqualTo(232_448);
        }
        int fusedStages = stages(src, "sm90_backward_dkdv<128, (\\d+), true>");
        assertThat(CudaAttentionKernels.hopperFusedShared()).as("the one-kernel backward")
                .isEqualTo(evaluate(macro(src, "SM90_FUSED_SHARED"), names, 128, fusedStages))
                .isLessThanOrEqualTo(232_448);
    }

    @Test
    void theEvaluatorReadsSumsProductsAndParentheses() {
        assertThat(evaluate("(1 + 2 * (3 + N) + 4)", Map.of("N", 5), 0, 0)).isEqualTo(21);
        assertThat(evaluate("(HS) * (STAGES) + 1", Map.of(), 7, 3)).isEqualTo(22);
    }

    /** A C expression of +, *, parentheses, integers and names (HS, STAGES and {@code names}). */
    static int evaluate(String expression, Map<String, Integer> names, int hs, int stages) {
        String[] tokens = expression.replaceAll("([()+*])", " $1 ").trim().split("\\s+");
        int[] at = {0};
        int value = sum(tokens, at, names, hs, stages);
        assertThat(at[0]).as("the whole of " + expression).isEqualTo(tokens.length);
        return value;
    }

    private static int sum(String[] tokens, int[] at, Map<String, Integer> names, int hs, int stages) {
        int value = product(tokens, at, names, hs, stages);
        while (at[0] < tokens.length && tokens[at[0]].equals("+")) {
            at[0]++;
            value += product(tokens, at, names, hs, stages);
        }
        return value;
    }

    private static int product(String[] tokens, int[] at, Map<String, Integer> names, int hs, int stages) {
        int value = factor(tokens, at, names, hs, stages);
        while (at[0] < tokens.length && tokens[at[0]].equals("*")) {
            at[0]++;
            value *= factor(tokens, at, names, hs, stages);
        }
        return value;
    }

    private static int factor(String[] tokens, int[] at, Map<String, Integer> names, int hs, int stages) {
        String t = tokens[at[0]++];
        if (t.equals("(")) {
            int value = sum(tokens, at, names, hs, stages);
            assertThat(tokens[at[0]++]).isEqualTo(")");
            return value;
        }
        if (t.equals("HS")) {
            return hs;
        }
        if (t.equals("STAGES")) {
            return stages;
        }
        if (names.containsKey(t)) {
            return names.get(t);
        }
        return Integer.parseInt(t);
    }
}
