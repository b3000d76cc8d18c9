package io.fsdp4j.backend.cpu;

import static org.assertj.core.api.Assertions.assertThat;

import java.util.SplittableRandom;
import org.junit.jupiter.api.Test;

/**
 * AdamW's vectorised loop against its scalar loop, bit for bit (parameters and both moments), over counts that leave
 * a scalar tail or none, at offsets, over several steps with gradients of every size (zeros, tiny, large) and a
 * gradient scale, with 1, 2 and 4 threads; and the scalar loop against the formula written out in double.
 */
class CpuAdamWTest {
    private static float[] random(SplittableRandom r, int n) {
        float[] v = new float[n];
        for (int i = 0; i < n; i++) {
            double kind = r.nextDouble();
            v[i] = kind < 0.1 ? 0f : kind < 0.2 ? (float) r.nextDouble(-1e-20, 1e-20)
                    : kind < 0.3 ? (float) r.nextDouble(-1e4, 1e4) : (float) r.nextDouble(-1, 1);
        }
        return v;
    }

    @Test
    void vectorisedLoopIsTheScalarLoopBitForBit() {
        assertThat(VectorAdamW.usable()).as("the vector loop applies on this JVM").isTrue();
        SplittableRandom r = new SplittableRandom(11);
        for (int count : new int[] {1, 7, 8, 16, 37, Parallel.GRAIN + 5, 3 * Parallel.GRAIN}) {
            int off = 3;
            float[] p0 = random(r, count + off), m0 = new float[count + off], v0 = new float[count + off];
            for (int cores : new int[] {1, 2, 4}) {
                float[] p = p0.clone(), m = m0.clone(), v = v0.clone();
                float[] ps = p0.clone(), ms = m0.clone(), vs = v0.clone();
                for (int step = 1; step <= 3; step++) {
                    float[] g = random(new SplittableRandom(100 * count + step), count + off);
                    float scale = step == 2 ? 0.25f : 1f;
                    int s = step;
                    Parallel.withCores(cores, () -> {
                        CpuAdamW.step(p, off, g, off, m, off, v, off, count, 3e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, s, scale,
                                true);
                        CpuAdamW.step(ps, off, g, off, ms, off, vs, off, count, 3e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, s,
                                scale, false);
                    });
                }
                assertThat(p).as("parameters, count %d, %d cores", count, cores).isEqualTo(ps);
                assertThat(m).as("first moments, count %d", count).isEqualTo(ms);
                assertThat(v).as("second moments, count %d", count).isEqualTo(vs);
            }
        }
    }

    @Test
    void scalarLoopIsPyTorchsFormula() {
        float[] p = {0.5f, -2f, 0f}, g = {0.1f, -3f, 1e-3f}, m = {0.01f, 0f, -0.2f}, v = {1e-4f, 0f, 0.3f};
        float lr = 1e-2f, b1 = 0.9f, b2 = 0.999f, eps = 1e-8f, wd = 0.1f;
        long step = 4;
        float[] want = new float[3];
        for (int i = 0; i < 3; i++) {
            double mi = b1 * m[i] + (1 - b1) * g[i], vi = b2 * v[i] + (1 - b2) * g[i] * g[i];
            double denom = Math.sqrt(vi) / Math.sqrt(1 - Math.pow(b2, step)) + eps;
            want[i] = (float) (p[i] * (1 - lr * wd) - lr / (1 - Math.pow(b1, step)) * mi / denom);
        }
        CpuAdamW.step(p, 0, g, 0, m, 0, v, 0, 3, lr, b1, b2, eps, wd, step, 1f, false);
        for (int i = 0; i < 3; i++) {
            assertThat(p[i]).as("parameter %d", i).isCloseTo(want[i], org.assertj.core.data.Offset.offset(
                    1e-6f * Math.max(1f, Math.abs(want[i]))));
        }
    }
}
