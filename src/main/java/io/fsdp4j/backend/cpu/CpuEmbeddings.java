package io.fsdp4j.backend.cpu;

/**
 * Token embeddings (rows of a table by id, and their gradient) and rotary position embeddings (rotation of each
 * head's two halves by the angles of the row's position; backward rotates back).
 */
public final class CpuEmbeddings {
    private CpuEmbeddings() {}

    /** out (rows, c) = table[ids]; an id outside the table is the user's error. */
    public static void forward(float[] o, int oo, int[] id, int io, float[] w, int wo, int rows, int c, int vocab) {
        for (int r = 0; r < rows; r++) {
            int tok = id[io + r];
            if (tok < 0 || tok >= vocab) {
                throw new io.fsdp4j.UserError("token id " + tok + " is outside the vocabulary of " + vocab
                        + " tokens (valid ids are 0.." + (vocab - 1) + ")");
            }
            System.arraycopy(w, wo + tok * c, o, oo + r * c, c);
        }
    }

    /** dTable[ids[r]] += dOut[r], rows in order. */
    public static void backward(float[] dw, int dwo, int[] id, int io, float[] g, int go, int rows, int c) {
        for (int r = 0; r < rows; r++) { // sequential: repeated ids accumulate in a fixed order
            int dst = dwo + id[io + r] * c, src = go + r * c;
            for (int j = 0; j < c; j++) {
                dw[dst + j] += g[src + j];
            }
        }
    }

    /**
     * Rotates the first {@code rotatedHeads} heads (hs = 2 * half values each) of each row of x ({@code width} values
     * a row) by +angle ({@code sign} 1, forward) or -angle ({@code sign} -1, backward: the transpose of a rotation is
     * its inverse), the angles of the row's position in cos and sin (positions, half).
     */
    public static void rotate(float[] xs, int xo, int width, int[] pos, int po, int rows, float[] cs, int co,
                              float[] sn, int so, int half, int rotatedHeads, float sign) {
        int hs = 2 * half;
        Parallel.forEach(rows, 6L * rotatedHeads * hs, r -> {
            int p = pos[po + r];
            for (int h = 0; h < rotatedHeads; h++) {
                int base = xo + r * width + h * hs;
                for (int j = 0; j < half; j++) {
                    float c = cs[co + p * half + j], s = sign * sn[so + p * half + j];
                    float x1 = xs[base + j], x2 = xs[base + half + j];
                    xs[base + j] = x1 * c - x2 * s;
                    xs[base + half + j] = x2 * c + x1 * s;
                }
            }
        });
    }
}
