package io.fsdp4j.optim;

import static org.assertj.core.api.Assertions.assertThat;

import io.fsdp4j.backend.CpuBackend;
import io.fsdp4j.tensor.Tensor;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.SplittableRandom;
import org.junit.jupiter.api.Test;

/**
 * The host AdamW of offloaded shards gives the CPU backend's adamw bit for bit, through its vectorised loop (the
 * tests run with jdk.incubator.vector) and its scalar fallback alike, over sizes that leave tails after whole
 * vectors and whole chunks.
 */
class HostAdamWTest {

    @Test
    void vectorisedAndScalarLoopsGiveTheCpuBackendsBits() {
        assertThat(HostAdamW.describe()).startsWith("vectorised"); // surefire adds the module, as bin/fsdp4j does
        CpuBackend cpu = CpuBackend.INSTANCE;
        SplittableRandom random = new SplittableRandom(3);
        int n = 3 * HostAdamW.CHUNK + 37;
        float[] p = new float[n], g = new float[n], m = new float[n], v = new float[n];
        for (int i = 0; i < n; i++) {
            p[i] = (float) random.nextGaussian();
            g[i] = (float) (random.nextGaussian() * 1e-2);
            m[i] = (float) (random.nextGaussian() * 1e-3);
            v[i] = (float) Math.abs(random.nextGaussian() * 1e-5);
        }
        Tensor tp = cpu.upload(p, n), tg = cpu.upload(g, n), tm = cpu.upload(m, n), tv = cpu.upload(v, n);
        cpu.adamw(tp.view(5, n - 9), tg.view(5, n - 9), tm.view(5, n - 9), tv.view(5, n - 9), 3e-4f, 0.9f, 0.95f, 1e-8f,
                0.1f, 7);
        try (Arena arena = Arena.ofShared()) { // shared: the update runs on the pool's threads
            MemorySegment[] vec = {native_(arena, p), native_(arena, g), native_(arena, m), native_(arena, v)};
            MemorySegment[] sca = {native_(arena, p), native_(arena, g), native_(arena, m), native_(arena, v)};
            HostAdamW.step(vec[0], vec[1], vec[2], vec[3], 5, n - 9, 3e-4f, 0.9f, 0.95f, 1e-8f, 0.1f, 7);
            HostAdamW.scalar(sca[0], sca[1], sca[2], sca[3], 5, n - 4,
                    HostAdamW.Update.of(3e-4f, 0.9f, 0.95f, 1e-8f, 0.1f, 7));
            float[][] expected = {cpu.toFloats(tp), cpu.toFloats(tg), cpu.toFloats(tm), cpu.toFloats(tv)};
            for (int k = 0; k < 4; k++) {
                assertThat(vec[k].toArray(ValueLayout.JAVA_FLOAT)).as("vectorised, tensor %d", k).containsExactly(expected[k]);
                assertThat(sca[k].toArray(ValueLayout.JAVA_FLOAT)).as("scalar, tensor %d", k).containsExactly(expected[k]);
            }
            assertThat(expected[0][4]).isEqualTo(p[4]); // untouched outside the range
            assertThat(expected[0][5]).isNotEqualTo(p[5]);
        }
    }

    private static MemorySegment native_(Arena arena, float[] values) {
        return arena.allocateFrom(ValueLayout.JAVA_FLOAT, values);
    }
}
