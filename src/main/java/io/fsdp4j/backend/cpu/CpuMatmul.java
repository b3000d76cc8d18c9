package io.fsdp4j.backend.cpu;

/**
 * Matrix products of a linear layer in fp32 on plain arrays. Weights are (O,I) as in Hugging Face checkpoints. All
 * three products (forward, input gradient, weight gradient) are one blocked product C += A B in which A and B are
 * read through strides, so that no transposed copy is ever made: each task owns a block of C, packs the slices of A
 * and B it needs into per-thread panels (cache-sized, reused from call to call), and runs a register tile over them
 * ({@link VectorMatmul} when the JVM has jdk.incubator.vector).
 *
 * <p>Determinism: every element of C is the chain c = fma(a_k, b_k, c) for k = 0, 1, ... in order, starting from its
 * initial value (zero, the bias, or the gradient being accumulated into). Blocking, tiles, tasks and threads decide
 * only which thread runs a chain and when, never its order: the results are the same bits for any thread count, and
 * the same for the scalar tile as for the vector one.
 */
public final class CpuMatmul {
    private static final boolean VECTORISED = ModuleLayer.boot().findModule("jdk.incubator.vector").isPresent();
    /**
     * Rows of the register tile: 8 with 512-bit vectors (16 accumulators of their 32 registers), else 4 (AVX2's 16
     * registers: a taller tile spilled). The tile's shape decides which thread runs a chain, never its order.
     */
    static final int MR = VECTORISED && VectorMatmul.width() >= 32 ? 8 : 4;
    /** Rows of C per task (a multiple of the tile's rows). */
    static final int MC = 64;
    /** Columns of C per task (a multiple of the tile width). */
    static final int NC = 256;
    /** Steps of k per packed panel. */
    static final int KC = 256;

    /** Columns of the register tile. */
    static final int NR = VECTORISED ? VectorMatmul.width() : 16;

    /** Floats of packed A that a task keeps for all its columns (4 MiB): beyond it, A is packed per column span. */
    static final int A_KEPT = 1 << 20;

    /**
     * Columns of C whose k-panel of B a task packs at once (4 MiB of B): each MC rows of A packed for a k-panel then
     * serve all of them. With one NC block per packing, A was packed again for every 256 columns (14 times in a
     * forward at the 7B o-projection's shape, element by element); by count, up to an eighth of such a product's time.
     * The panel of B that a column of tiles reads still fits L1; the whole span sits in L3.
     */
    static final int NSPAN = 4096;

    /**
     * Per-thread packed panels of A and B (B grown up to {@link #NSPAN} columns as needed), one tile of C for the
     * edges, and the packed A of a whole task (grown up to {@link #A_KEPT} as needed): allocated once per thread.
     */
    private static final class Scratch {
        final float[] a = new float[MC * KC], tile = new float[MR * NR];
        float[] b = new float[roundUp(NC, NR) * KC];
        float[] kept = new float[0];

        float[] b(int columns) {
            int floats = roundUp(columns, NR) * KC;
            if (b.length < floats) {
                b = new float[floats];
            }
            return b;
        }

        float[] kept(int floats) {
            if (kept.length < floats) {
                kept = new float[floats];
            }
            return kept;
        }
    }

    private static final ThreadLocal<Scratch> SCRATCH = ThreadLocal.withInitial(Scratch::new);

    private CpuMatmul() {}

    private static int roundUp(int v, int m) {
        return (v + m - 1) / m * m;
    }

    /** y (N,O) = x (N,I) @ w (O,I)^T + bias (O, may be null). */
    public static void forward(float[] y, int yo, float[] x, int xo, float[] w, int wo, float[] bias, int bo,
                               int n, int in, int out) {
        product(y, yo, out, x, xo, in, 1, w, wo, 1, in, n, out, in, true, bias, bo);
    }

    /** dx (N,I) = dy (N,O) @ w (O,I). */
    public static void backwardInput(float[] dx, int dxo, float[] dy, int dyo, float[] w, int wo,
                                     int n, int in, int out) {
        product(dx, dxo, in, dy, dyo, out, 1, w, wo, in, 1, n, in, out, true, null, 0);
    }

    /** dw (O,I) += dy (N,O)^T @ x (N,I) ; dBias (O) += column sums of dy, if dBias is not null. */
    public static void backwardWeight(float[] dw, int dwo, float[] dBias, int dbo, float[] dy, int dyo,
                                      float[] x, int xo, int n, int in, int out) {
        product(dw, dwo, in, dy, dyo, 1, out, x, xo, in, 1, out, in, n, false, null, 0);
        if (dBias != null) {
            int chunk = 64;
            Parallel.forEach((out + chunk - 1) / chunk, (long) n * chunk, ch -> {
                int o0 = ch * chunk, o1 = Math.min(out, o0 + chunk);
                for (int r = 0; r < n; r++) { // rows in order: a fixed sum
                    int row = dyo + r * out;
                    for (int o = o0; o < o1; o++) {
                        dBias[dbo + o] += dy[row + o];
                    }
                }
            });
        }
    }

    /**
     * C (m,k-sum,n) at c[co + i*ldc + j] (+)= A B, A(i,p) = a[ao + i*ars + p*acs], B(p,j) = b[bo + p*brs + j*bcs].
     * With {@code overwrite}, C starts from the bias (a row of n, or zero when null) instead of its contents. Each task
     * owns a run of rows and a run of NC-column blocks: it packs each k-panel of B once for all of its rows and up to
     * {@link #NSPAN} of its columns, each MC rows of A once for those columns, and (up to {@link #A_KEPT} floats) its
     * rows of A once for all of its columns when they span more. The split never changes a result.
     */
    static void product(float[] c, int co, int ldc, float[] a, int ao, int ars, int acs, float[] b, int bo, int brs,
                        int bcs, int m, int n, int k, boolean overwrite, float[] bias, int biasO) {
        int nBlocks = (n + NC - 1) / NC, rowBlocks = (m + MC - 1) / MC;
        // a few tasks per thread that the loop will get (to balance them; one thread: one task), as few as that
        // allows, cut by rows only when there are fewer column blocks than tasks
        int threads = Parallel.threadsFree(), tasks = threads == 1 ? 1 : 3 * threads;
        int chunks = Math.max(1, Math.min(rowBlocks, (tasks + nBlocks - 1) / nBlocks));
        int rowsPerTask = (rowBlocks + chunks - 1) / chunks * MC;
        int mTasks = (m + rowsPerTask - 1) / rowsPerTask;
        int groups = Math.max(1, Math.min(nBlocks, (tasks + mTasks - 1) / mTasks));
        int blocksPerGroup = (nBlocks + groups - 1) / groups;
        int nTasks = (nBlocks + blocksPerGroup - 1) / blocksPerGroup;
        Parallel.forEach(mTasks * nTasks, 2L * rowsPerTask * NC * blocksPerGroup * k, task -> {
            int i0 = task / nTasks * rowsPerTask, rows = Math.min(rowsPerTask, m - i0);
            int firstBlock = task % nTasks * blocksPerGroup, blocks = Math.min(blocksPerGroup, nBlocks - firstBlock);
            int j0 = firstBlock * NC, j1 = Math.min(n, j0 + blocks * NC);
            float[] kept = null;
            long keptFloats = (long) roundUp(rows, MR) * roundUp(k, KC);
            if (j1 - j0 > NSPAN && keptFloats <= A_KEPT) { // A's rows of this task, packed once for all its columns
                kept = SCRATCH.get().kept((int) keptFloats);
                for (int p0 = 0; p0 < k; p0 += KC) {
                    int kc = Math.min(KC, k - p0);
                    for (int ib = i0; ib < i0 + rows; ib += MC) {
                        packA(kept, keptOffset(rows, p0, ib - i0, kc), a, ao, ars, acs, ib,
                                Math.min(MC, i0 + rows - ib), p0, kc);
                    }
                }
            }
            for (int j = j0; j < j1; j += NSPAN) {
                block(c, co, ldc, a, ao, ars, acs, b, bo, brs, bcs, i0, rows, Math.min(NSPAN, j1 - j), k, overwrite,
                        bias, biasO, j, kept, WHOLE, 0);
            }
        });
    }

    /** Where the panels of rows from {@code row} (a multiple of MC) of k-panel {@code p0} start in a task's kept A. */
    private static int keptOffset(int rows, int p0, int row, int kc) {
        return p0 * roundUp(rows, MR) + row * kc;
    }

    /** {@link #productHere}'s {@code causal}: the whole product. */
    static final int WHOLE = 0;
    /**
     * Only C(i, j) with j <= i + diag (causal attention's scores: key j is visible to the query at diag + i): the
     * register tiles wholly above that diagonal are skipped (their elements left as they were: zero under
     * {@code overwrite}), the others computed whole.
     */
    static final int COLUMNS_TO_ROW = 1;
    /** A(i, p) is zero for p > i + diag (probabilities by query row): each row's chain stops there. */
    static final int K_TO_ROW = 2;
    /** A(i, p) is zero for p < i - diag (probabilities by key row, transposed): each row's chain starts there. */
    static final int K_FROM_ROW = 3;

    /** As {@link #product}, on the calling thread only (for callers that are one task of a parallel loop). */
    static void productHere(float[] c, int co, int ldc, float[] a, int ao, int ars, int acs, float[] b, int bo,
                            int brs, int bcs, int m, int n, int k, boolean overwrite) {
        productHere(c, co, ldc, a, ao, ars, acs, b, bo, brs, bcs, m, n, k, overwrite, WHOLE, 0);
    }

    /**
     * As {@link #productHere}, skipping the register tiles and the k-steps that a causal mask makes zero
     * ({@code causal}: {@link #COLUMNS_TO_ROW}, {@link #K_TO_ROW}, {@link #K_FROM_ROW}, with {@code diag}). A tile
     * is skipped whole or runs its k-steps in order, so every element computed is the same chain, less only terms
     * whose factor from A is zero: fma(0, b, c) is c for a finite b (c is never -0, as chains start from +0), the same
     * bits as the whole product.
     */
    static void productHere(float[] c, int co, int ldc, float[] a, int ao, int ars, int acs, float[] b, int bo,
                            int brs, int bcs, int m, int n, int k, boolean overwrite, int causal, int diag) {
        for (int j0 = 0; j0 < n; j0 += NSPAN) {
            block(c, co, ldc, a, ao, ars, acs, b, bo, brs, bcs, 0, m, Math.min(NSPAN, n - j0), k, overwrite, null, 0,
                    j0, null, causal, diag);
        }
    }

    /**
     * Rows [i0, i0+rows) x columns [j0, j0+nc) of C (nc up to {@link #NSPAN}). For each k-panel, B's slice is packed
     * once, then each MC rows of A (or they are taken from {@code kept}, the task's A packed beforehand), and the
     * register tile runs over them, a column of tiles at a time (the panel of B it reads stays in L1 while the MC
     * rows of A stream from L2), on the part of it that {@code causal} leaves (see {@link #productHere}).
     */
    private static void block(float[] c, int co, int ldc, float[] a, int ao, int ars, int acs, float[] b, int bo,
                              int brs, int bcs, int i0, int rows, int nc, int k, boolean overwrite, float[] bias,
                              int biasO, int j0, float[] kept, int causal, int diag) {
        // Under overwrite, C starts from the bias (or zero). In a whole product each tile of the first k-panel
        // starts its chains from it in the registers (an edge tile: writes it into its own elements just before it
        // runs): C is not cleared in a pass of its own (the head's logits at the 40M shape: 131 MB written to memory
        // and read back). A causal product clears C beforehand, as the tiles it skips must leave zeros.
        boolean fromBias = overwrite && causal == WHOLE && k > 0;
        if (overwrite && !fromBias) {
            for (int i = i0; i < i0 + rows; i++) {
                int row = co + i * ldc + j0;
                if (bias != null) {
                    System.arraycopy(bias, biasO + j0, c, row, nc);
                } else {
                    java.util.Arrays.fill(c, row, row + nc, 0f);
                }
            }
        }
        Scratch s = SCRATCH.get();
        float[] pb = s.b(nc);
        for (int p0 = 0; p0 < k; p0 += KC) {
            int kc = Math.min(KC, k - p0);
            packB(pb, b, bo, brs, bcs, j0, nc, p0, kc);
            for (int ib = i0; ib < i0 + rows; ib += MC) {
                int mc = Math.min(MC, i0 + rows - ib);
                // packed even when A is stored by rows: read in place (four rows as four streams) it ran 10 to 20%
                // slower at the 40M and demo shapes
                float[] pa = s.a;
                int panel = 0;
                if (kept != null) {
                    pa = kept;
                    panel = keptOffset(rows, p0, ib - i0, kc);
                } else {
                    packA(pa, 0, a, ao, ars, acs, ib, mc, p0, kc);
                }
                for (int jr = 0; jr < nc; jr += NR) {
                    int cols = Math.min(NR, nc - jr), pbo = jr * kc;
                    for (int ir = 0; ir < mc; ir += MR) {
                        int tileRows = Math.min(MR, mc - ir), pao = panel + ir * kc;
                        int cOff = co + (ib + ir) * ldc + j0 + jr;
                        int from = 0, to = kc; // the tile's k-steps in this panel
                        if (causal != WHOLE) {
                            int row = ib + ir; // the tile's first row
                            if (causal == COLUMNS_TO_ROW && j0 + jr > row + tileRows - 1 + diag) {
                                continue;
                            }
                            if (causal == K_TO_ROW) {
                                to = Math.min(kc, row + tileRows + diag - p0);
                            } else if (causal == K_FROM_ROW) {
                                from = Math.max(0, row - diag - p0);
                            }
                            if (from >= to) {
                                continue;
                            }
                        }
                        boolean whole = tileRows == MR && cols == NR;
                        if (fromBias && p0 == 0 && whole) { // the chains start from the bias (zero) in registers
                            tileFrom(to - from, pa, pao + from * MR, pb, pbo + from * NR, c, cOff, ldc, bias,
                                    bias == null ? 0 : biasO + j0 + jr);
                            continue;
                        }
                        if (fromBias && p0 == 0) { // an edge tile's chains start from the bias (zero)
                            for (int r = 0; r < tileRows; r++) {
                                int row = cOff + r * ldc;
                                if (bias != null) {
                                    System.arraycopy(bias, biasO + j0 + jr, c, row, cols);
                                } else {
                                    java.util.Arrays.fill(c, row, row + cols, 0f);
                                }
                            }
                        }
                        if (whole) {
                            tile(to - from, pa, pao + from * MR, pb, pbo + from * NR, c, cOff, ldc);
                        } else { // an edge: the tile on a copy of the valid part (the other lanes are never read)
                            float[] t = s.tile;
                            java.util.Arrays.fill(t, 0f);
                            for (int r = 0; r < tileRows; r++) {
                                System.arraycopy(c, cOff + r * ldc, t, r * NR, cols);
                            }
                            tile(to - from, pa, pao + from * MR, pb, pbo + from * NR, t, 0, NR);
                            for (int r = 0; r < tileRows; r++) {
                                System.arraycopy(t, r * NR, c, cOff + r * ldc, cols);
                            }
                        }
                    }
                }
            }
        }
    }

    /**
     * Rows [i0, i0+mc) x columns [p0, p0+kc) of A into panels of MR rows from pa[pao]: panel q holds (p, r) at
     * pao + q*MR*kc + p*MR + r.
     */
    private static void packA(float[] pa, int pao, float[] a, int ao, int ars, int acs, int i0, int mc, int p0,
                              int kc) {
        int first = 0; // the first row left to the loop below
        if (ars == 1 && acs != 1) {
            // the weight gradient's dy^T: A's rows side by side in each row of dy. Row by row of dy, its mc values
            // to the panels, MR at a time: each line of dy is read once, in order. Panel by panel, MR values at a
            // time a row of dy apart (a stride of 0.5 to 14 KiB at the demo's and the 7B shapes, which falls on few
            // cache sets), it was the largest item outside the register tile in the demo's profile. The MR values go
            // by System.arraycopy (C2 makes the short copy a vector move), not by a FloatVector of another shape: a
            // second vector shape in the process makes FloatVector's shared call profiles bimorphic, and a kernel
            // that C2 then compiles with them boxes its vectors (VectorShapeTest says why).
            int quads = mc / MR;
            for (int p = 0; p < kc; p++) {
                int src = ao + i0 + (p0 + p) * acs, dst = pao + p * MR;
                for (int q = 0; q < quads; q++) {
                    System.arraycopy(a, src + q * MR, pa, dst + q * MR * kc, MR);
                }
            }
            first = quads * MR;
        }
        for (int ir = first; ir < mc; ir += MR) {
            int base = pao + ir * kc, rows = Math.min(MR, mc - ir);
            if (acs == 1) {
                for (int r = 0; r < rows; r++) {
                    int src = ao + (i0 + ir + r) * ars + p0;
                    for (int p = 0; p < kc; p++) {
                        pa[base + p * MR + r] = a[src + p];
                    }
                }
            } else {
                for (int p = 0; p < kc; p++) {
                    int src = ao + (i0 + ir) * ars + (p0 + p) * acs;
                    for (int r = 0; r < rows; r++) {
                        pa[base + p * MR + r] = a[src + r * ars];
                    }
                }
            }
            for (int r = rows; r < MR; r++) {
                for (int p = 0; p < kc; p++) {
                    pa[base + p * MR + r] = 0f;
                }
            }
        }
    }

    /** Rows [p0, p0+kc) x columns [j0, j0+nc) of B into panels of NR columns: (p, j) at q*NR*kc + p*NR + j. */
    private static void packB(float[] pb, float[] b, int bo, int brs, int bcs, int j0, int nc, int p0, int kc) {
        for (int jr = 0; jr < nc; jr += NR) {
            int base = jr * kc, cols = Math.min(NR, nc - jr);
            if (bcs == 1) {
                int src = bo + p0 * brs + j0 + jr;
                if (cols == NR && VECTORISED) {
                    for (int p = 0; p < kc; p++) {
                        VectorMatmul.copyWidth(b, src + p * brs, pb, base + p * NR);
                    }
                } else {
                    for (int p = 0; p < kc; p++) {
                        int dst = base + p * NR;
                        System.arraycopy(b, src + p * brs, pb, dst, cols);
                        java.util.Arrays.fill(pb, dst + cols, dst + NR, 0f);
                    }
                }
            } else {
                for (int j = 0; j < cols; j++) {
                    int src = bo + p0 * brs + (j0 + jr + j) * bcs;
                    for (int p = 0; p < kc; p++) {
                        pb[base + p * NR + j] = b[src + p * brs];
                    }
                }
                for (int j = cols; j < NR; j++) {
                    for (int p = 0; p < kc; p++) {
                        pb[base + p * NR + j] = 0f;
                    }
                }
            }
        }
    }

    /** The MR x NR register tile over packed panels, vectorised when the JVM can. */
    private static void tile(int kc, float[] pa, int pao, float[] pb, int pbo, float[] c, int co, int ldc) {
        if (VECTORISED) {
            if (MR == 8) {
                VectorMatmul.tile8(kc, pa, pao, pb, pbo, c, co, ldc);
            } else {
                VectorMatmul.tile(kc, pa, pao, pb, pbo, c, co, ldc);
            }
            return;
        }
        for (int r = 0; r < MR; r++) {
            for (int j = 0; j < NR; j++) {
                float acc = c[co + r * ldc + j];
                for (int p = 0; p < kc; p++) {
                    acc = Math.fma(pa[pao + p * MR + r], pb[pbo + p * NR + j], acc);
                }
                c[co + r * ldc + j] = acc;
            }
        }
    }

    /**
     * The register tile of a product that overwrites C, over its first k-panel: each chain starts from the bias
     * (bias[bo + j], the same for every row; zero where bias is null) held in the registers, instead of from C
     * written with it first: the same chains, the same bits, without the pass that writes C and the loads that read
     * it back (small tiles: at the demo's shapes a tile's first panel is all of its k).
     */
    private static void tileFrom(int kc, float[] pa, int pao, float[] pb, int pbo, float[] c, int co, int ldc,
                                 float[] bias, int bo) {
        if (VECTORISED) {
            if (MR == 8) {
                VectorMatmul.tileFrom8(kc, pa, pao, pb, pbo, c, co, ldc, bias, bo);
            } else {
                VectorMatmul.tileFrom(kc, pa, pao, pb, pbo, c, co, ldc, bias, bo);
            }
            return;
        }
        for (int r = 0; r < MR; r++) {
            for (int j = 0; j < NR; j++) {
                float acc = bias == null ? 0f : bias[bo + j];
                for (int p = 0; p < kc; p++) {
                    acc = Math.fma(pa[pao + p * MR + r], pb[pbo + p * NR + j], acc);
                }
                c[co + r * ldc + j] = acc;
            }
        }
    }

    /** y[yo..yo+len) += a * x[xo..xo+len). */
    static void axpy(float[] y, int yo, float a, float[] x, int xo, int len) {
        for (int j = 0; j < len; j++) {
            y[yo + j] += a * x[xo + j];
        }
    }

    static float dot(float[] a, int ao, float[] b, int bo, int len) {
        float s0 = 0f, s1 = 0f, s2 = 0f, s3 = 0f;
        int j = 0;
        for (; j + 3 < len; j += 4) {
            s0 += a[ao + j] * b[bo + j];
            s1 += a[ao + j + 1] * b[bo + j + 1];
            s2 += a[ao + j + 2] * b[bo + j + 2];
            s3 += a[ao + j + 3] * b[bo + j + 3];
        }
        for (; j < len; j++) {
            s0 += a[ao + j] * b[bo + j];
        }
        return (s0 + s1) + (s2 + s3);
    }
}
