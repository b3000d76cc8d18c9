package io.fsdp4j.backend.cpu;

import jdk.incubator.vector.FloatVector;
import jdk.incubator.vector.VectorSpecies;

/**
 * {@link CpuMatmul}'s register tiles with the Vector API (loaded only when the JVM has jdk.incubator.vector). With
 * 256-bit vectors (AVX2: 16 registers), {@link #tile}: a 4 x (2 vectors) block of C held in eight vector registers
 * while k runs over the packed panels, four broadcasts of A and two loads of B feeding eight fused multiply-adds per
 * k; a taller tile (6 x 2, twelve accumulators) spills there and runs at half the rate. With 512-bit vectors (32
 * registers), {@link #tile8}: 8 x (2 vectors), sixteen accumulators, 9-11% faster at the 7B shapes on a Zen 5 core
 * (docs/benchmarks.md, 2026-11-26, eighth session). (The cpurate7 session's 5 x 2 tile ran "at half speed" inside
 * the product under ParallelGC; the slowdown that one run in four or five met until the eighth session, a second
 * vector shape polluting C2's profiles, may have been what it saw.) Each element of C is the chain
 * c = fma(a_k, b_k, c) for k in order, exactly as {@link CpuMatmul}'s scalar tile computes it: the same bits.
 */
final class VectorMatmul {
    static final VectorSpecies<Float> FLOATS = FloatVector.SPECIES_PREFERRED;

    private VectorMatmul() {}

    /** The tile's width in floats: two vectors. */
    static int width() {
        return 2 * FLOATS.length();
    }

    /**
     * C[r, j] (4 rows at c[co + r*ldc], {@link #width()} columns) += sum over k < kc of pa[pao + k*4 + r] *
     * pb[pbo + k*width + j].
     */
    static void tile(int kc, float[] pa, int pao, float[] pb, int pbo, float[] c, int co, int ldc) {
        VectorSpecies<Float> s = FLOATS;
        int l = s.length(), w = 2 * l;
        int r0 = co, r1 = r0 + ldc, r2 = r1 + ldc, r3 = r2 + ldc;
        FloatVector c00 = FloatVector.fromArray(s, c, r0), c01 = FloatVector.fromArray(s, c, r0 + l);
        FloatVector c10 = FloatVector.fromArray(s, c, r1), c11 = FloatVector.fromArray(s, c, r1 + l);
        FloatVector c20 = FloatVector.fromArray(s, c, r2), c21 = FloatVector.fromArray(s, c, r2 + l);
        FloatVector c30 = FloatVector.fromArray(s, c, r3), c31 = FloatVector.fromArray(s, c, r3 + l);
        for (int k = 0; k < kc; k++) { // offsets from k, not stepped: C2 then hoists the bounds checks (+10%)
            int a = pao + 4 * k, b = pbo + w * k;
            FloatVector b0 = FloatVector.fromArray(s, pb, b), b1 = FloatVector.fromArray(s, pb, b + l);
            FloatVector x = FloatVector.broadcast(s, pa[a]);
            c00 = x.fma(b0, c00);
            c01 = x.fma(b1, c01);
            x = FloatVector.broadcast(s, pa[a + 1]);
            c10 = x.fma(b0, c10);
            c11 = x.fma(b1, c11);
            x = FloatVector.broadcast(s, pa[a + 2]);
            c20 = x.fma(b0, c20);
            c21 = x.fma(b1, c21);
            x = FloatVector.broadcast(s, pa[a + 3]);
            c30 = x.fma(b0, c30);
            c31 = x.fma(b1, c31);
        }
        c00.intoArray(c, r0);
        c01.intoArray(c, r0 + l);
        c10.intoArray(c, r1);
        c11.intoArray(c, r1 + l);
        c20.intoArray(c, r2);
        c21.intoArray(c, r2 + l);
        c30.intoArray(c, r3);
        c31.intoArray(c, r3 + l);
    }

    /**
     * C[r, j] (4 rows at c[co + r*ldc], {@link #width()} columns) = bias[bo + j] (0 where bias is null) + sum over
     * k < kc of pa[pao + k*4 + r] * pb[pbo + k*width + j], each chain started from the bias in the registers: the
     * bits of {@link #tile} over C written with the bias first. Its loop is tile's: one method for both, the start
     * passed as an array and a row stride, ran the demo's shape 4.5% slower in eight pairs of runs (medians 10,466
     * against 10,965 tok/s, 2026-11-26): kept apart.
     */
    static void tileFrom(int kc, float[] pa, int pao, float[] pb, int pbo, float[] c, int co, int ldc, float[] bias,
                         int bo) {
        VectorSpecies<Float> s = FLOATS;
        int l = s.length(), w = 2 * l;
        FloatVector z0 = bias == null ? FloatVector.zero(s) : FloatVector.fromArray(s, bias, bo);
        FloatVector z1 = bias == null ? FloatVector.zero(s) : FloatVector.fromArray(s, bias, bo + l);
        FloatVector c00 = z0, c01 = z1, c10 = z0, c11 = z1, c20 = z0, c21 = z1, c30 = z0, c31 = z1;
        for (int k = 0; k < kc; k++) { // as tile's loop
            int a = pao + 4 * k, b = pbo + w * k;
            FloatVector b0 = FloatVector.fromArray(s, pb, b), b1 = FloatVector.fromArray(s, pb, b + l);
            FloatVector x = FloatVector.broadcast(s, pa[a]);
            c00 = x.fma(b0, c00);
            c01 = x.fma(b1, c01);
            x = FloatVector.broadcast(s, pa[a + 1]);
            c10 = x.fma(b0, c10);
            c11 = x.fma(b1, c11);
            x = FloatVector.broadcast(s, pa[a + 2]);
            c20 = x.fma(b0, c20);
            c21 = x.fma(b1, c21);
            x = FloatVector.broadcast(s, pa[a + 3]);
            c30 = x.fma(b0, c30);
            c31 = x.fma(b1, c31);
        }
        int r0 = co, r1 = r0 + ldc, r2 = r1 + ldc, r3 = r2 + ldc;
        c00.intoArray(c, r0);
        c01.intoArray(c, r0 + l);
        c10.intoArray(c, r1);
        c11.intoArray(c, r1 + l);
        c20.intoArray(c, r2);
        c21.intoArray(c, r2 + l);
        c30.intoArray(c, r3);
        c31.intoArray(c, r3 + l);
    }

    /**
     * As {@link #tile} for 8 rows (pa[pao + k*8 + r]): sixteen accumulators, for 512-bit vectors, whose 32 registers
     * hold them beside the two of B and the broadcast. Eight chains (4 rows) only just cover the latency of two FMA
     * units; sixteen leave slack for the loads.
     */
    static void tile8(int kc, float[] pa, int pao, float[] pb, int pbo, float[] c, int co, int ldc) {
        VectorSpecies<Float> s = FLOATS;
        int l = s.length(), w = 2 * l;
        int r0 = co, r1 = r0 + ldc, r2 = r1 + ldc, r3 = r2 + ldc;
        int r4 = r3 + ldc, r5 = r4 + ldc, r6 = r5 + ldc, r7 = r6 + ldc;
        FloatVector c00 = FloatVector.fromArray(s, c, r0), c01 = FloatVector.fromArray(s, c, r0 + l);
        FloatVector c10 = FloatVector.fromArray(s, c, r1), c11 = FloatVector.fromArray(s, c, r1 + l);
        FloatVector c20 = FloatVector.fromArray(s, c, r2), c21 = FloatVector.fromArray(s, c, r2 + l);
        FloatVector c30 = FloatVector.fromArray(s, c, r3), c31 = FloatVector.fromArray(s, c, r3 + l);
        FloatVector c40 = FloatVector.fromArray(s, c, r4), c41 = FloatVector.fromArray(s, c, r4 + l);
        FloatVector c50 = FloatVector.fromArray(s, c, r5), c51 = FloatVector.fromArray(s, c, r5 + l);
        FloatVector c60 = FloatVector.fromArray(s, c, r6), c61 = FloatVector.fromArray(s, c, r6 + l);
        FloatVector c70 = FloatVector.fromArray(s, c, r7), c71 = FloatVector.fromArray(s, c, r7 + l);
        for (int k = 0; k < kc; k++) { // as tile's loop
            int a = pao + 8 * k, b = pbo + w * k;
            FloatVector b0 = FloatVector.fromArray(s, pb, b), b1 = FloatVector.fromArray(s, pb, b + l);
            FloatVector x = FloatVector.broadcast(s, pa[a]);
            c00 = x.fma(b0, c00);
            c01 = x.fma(b1, c01);
            x = FloatVector.broadcast(s, pa[a + 1]);
            c10 = x.fma(b0, c10);
            c11 = x.fma(b1, c11);
            x = FloatVector.broadcast(s, pa[a + 2]);
            c20 = x.fma(b0, c20);
            c21 = x.fma(b1, c21);
            x = FloatVector.broadcast(s, pa[a + 3]);
            c30 = x.fma(b0, c30);
            c31 = x.fma(b1, c31);
            x = FloatVector.broadcast(s, pa[a + 4]);
            c40 = x.fma(b0, c40);
            c41 = x.fma(b1, c41);
            x = FloatVector.broadcast(s, pa[a + 5]);
            c50 = x.fma(b0, c50);
            c51 = x.fma(b1, c51);
            x = FloatVector.broadcast(s, pa[a + 6]);
            c60 = x.fma(b0, c60);
            c61 = x.fma(b1, c61);
            x = FloatVector.broadcast(s, pa[a + 7]);
            c70 = x.fma(b0, c70);
            c71 = x.fma(b1, c71);
        }
        c00.intoArray(c, r0);
        c01.intoArray(c, r0 + l);
        c10.intoArray(c, r1);
        c11.intoArray(c, r1 + l);
        c20.intoArray(c, r2);
        c21.intoArray(c, r2 + l);
        c30.intoArray(c, r3);
        c31.intoArray(c, r3 + l);
        c40.intoArray(c, r4);
        c41.intoArray(c, r4 + l);
        c50.intoArray(c, r5);
        c51.intoArray(c, r5 + l);
        c60.intoArray(c, r6);
        c61.intoArray(c, r6 + l);
        c70.intoArray(c, r7);
        c71.intoArray(c, r7 + l);
    }

    /** As {@link #tileFrom} for 8 rows: {@link #tile8}'s chains, started from the bias (or zero) in the registers. */
    static void tileFrom8(int kc, float[] pa, int pao, float[] pb, int pbo, float[] c, int co, int ldc, float[] bias,
                          int bo) {
        VectorSpecies<Float> s = FLOATS;
        int l = s.length(), w = 2 * l;
        FloatVector z0 = bias == null ? FloatVector.zero(s) : FloatVector.fromArray(s, bias, bo);
        FloatVector z1 = bias == null ? FloatVector.zero(s) : FloatVector.fromArray(s, bias, bo + l);
        FloatVector c00 = z0, c01 = z1;
        FloatVector c10 = z0, c11 = z1;
        FloatVector c20 = z0, c21 = z1;
        FloatVector c30 = z0, c31 = z1;
        FloatVector c40 = z0, c41 = z1;
        FloatVector c50 = z0, c51 = z1;
        FloatVector c60 = z0, c61 = z1;
        FloatVector c70 = z0, c71 = z1;
        for (int k = 0; k < kc; k++) { // as tile's loop
            int a = pao + 8 * k, b = pbo + w * k;
            FloatVector b0 = FloatVector.fromArray(s, pb, b), b1 = FloatVector.fromArray(s, pb, b + l);
            FloatVector x = FloatVector.broadcast(s, pa[a]);
            c00 = x.fma(b0, c00);
            c01 = x.fma(b1, c01);
            x = FloatVector.broadcast(s, pa[a + 1]);
            c10 = x.fma(b0, c10);
            c11 = x.fma(b1, c11);
            x = FloatVector.broadcast(s, pa[a + 2]);
            c20 = x.fma(b0, c20);
            c21 = x.fma(b1, c21);
            x = FloatVector.broadcast(s, pa[a + 3]);
            c30 = x.fma(b0, c30);
            c31 = x.fma(b1, c31);
            x = FloatVector.broadcast(s, pa[a + 4]);
            c40 = x.fma(b0, c40);
            c41 = x.fma(b1, c41);
            x = FloatVector.broadcast(s, pa[a + 5]);
            c50 = x.fma(b0, c50);
            c51 = x.fma(b1, c51);
            x = FloatVector.broadcast(s, pa[a + 6]);
            c60 = x.fma(b0, c60);
            c61 = x.fma(b1, c61);
            x = FloatVector.broadcast(s, pa[a + 7]);
            c70 = x.fma(b0, c70);
            c71 = x.fma(b1, c71);
        }
        int r0 = co, r1 = r0 + ldc, r2 = r1 + ldc, r3 = r2 + ldc;
        int r4 = r3 + ldc, r5 = r4 + ldc, r6 = r5 + ldc, r7 = r6 + ldc;
        c00.intoArray(c, r0);
        c01.intoArray(c, r0 + l);
        c10.intoArray(c, r1);
        c11.intoArray(c, r1 + l);
        c20.intoArray(c, r2);
        c21.intoArray(c, r2 + l);
        c30.intoArray(c, r3);
        c31.intoArray(c, r3 + l);
        c40.intoArray(c, r4);
        c41.intoArray(c, r4 + l);
        c50.intoArray(c, r5);
        c51.intoArray(c, r5 + l);
        c60.intoArray(c, r6);
        c61.intoArray(c, r6 + l);
        c70.intoArray(c, r7);
        c71.intoArray(c, r7 + l);
    }

    /** Copies one tile width ({@link #width()} floats) from src[so..] to dst[dO..]. */
    static void copyWidth(float[] src, int so, float[] dst, int dO) {
        int l = FLOATS.length();
        FloatVector.fromArray(FLOATS, src, so).intoArray(dst, dO);
        FloatVector.fromArray(FLOATS, src, so + l).intoArray(dst, dO + l);
    }
}
