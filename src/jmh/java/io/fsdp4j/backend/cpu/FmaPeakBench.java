package io.fsdp4j.backend.cpu;

import java.util.concurrent.TimeUnit;
import jdk.incubator.vector.FloatVector;
import jdk.incubator.vector.VectorSpecies;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Fork;
import org.openjdk.jmh.annotations.Measurement;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.Warmup;

/**
 * The FMA peak of one core as the Vector API reaches it: {@value #STEPS} steps of twelve independent vector FMA chains,
 * no memory. GFLOP/s = 2 x 12 x {@link #LANES} x {@value #STEPS} x ops/s / 1e9 (the lane count is printed by
 * {@link #lanes}, as its score).
 */
@State(Scope.Thread)
@BenchmarkMode(Mode.Throughput)
@OutputTimeUnit(TimeUnit.SECONDS)
@Warmup(iterations = 3, time = 2)
@Measurement(iterations = 5, time = 2)
@Fork(value = 1, jvmArgsAppend = {"--add-modules", "jdk.incubator.vector"})
public class FmaPeakBench {
    static final int STEPS = 1 << 16; // about 0.2 ms: reading the CPU clock is noise beside it
    private static final VectorSpecies<Float> S = FloatVector.SPECIES_PREFERRED;
    static final int LANES = S.length();

    public float seed = 1e-3f;

    @Benchmark
    public float fmaPeak(CpuRate rate) {
        long start = CpuRate.now();
        FloatVector a = FloatVector.broadcast(S, seed), b = FloatVector.broadcast(S, 0.999f);
        FloatVector c0 = a, c1 = a, c2 = a, c3 = a, c4 = a, c5 = a, c6 = a, c7 = a, c8 = a, c9 = a, c10 = a, c11 = a;
        for (int i = 0; i < STEPS; i++) {
            c0 = c0.fma(b, a);
            c1 = c1.fma(b, a);
            c2 = c2.fma(b, a);
            c3 = c3.fma(b, a);
            c4 = c4.fma(b, a);
            c5 = c5.fma(b, a);
            c6 = c6.fma(b, a);
            c7 = c7.fma(b, a);
            c8 = c8.fma(b, a);
            c9 = c9.fma(b, a);
            c10 = c10.fma(b, a);
            c11 = c11.fma(b, a);
        }
        float result = c0.add(c1).add(c2).add(c3).add(c4).add(c5).add(c6).add(c7).add(c8).add(c9).add(c10).add(c11)
                .lane(0);
        rate.add(2.0 * 12 * LANES * STEPS, start);
        return result;
    }

    /** Not a rate: the vector width in floats, the LANES of the GFLOP/s formula. */
    @Benchmark
    @BenchmarkMode(Mode.SingleShotTime)
    @Warmup(iterations = 0)
    @Measurement(iterations = 1)
    public int lanes() {
        return LANES;
    }
}
