package io.fsdp4j.backend.cpu;

import java.util.SplittableRandom;
import java.util.concurrent.TimeUnit;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Fork;
import org.openjdk.jmh.annotations.Level;
import org.openjdk.jmh.annotations.Measurement;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Param;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.Warmup;

/**
 * The three products of a linear layer (forward, input gradient, weight gradient) at the 40M Llama's and Qwen2.5-7B's
 * shapes, in operations per second: GFLOP/s = 2 N I O x ops/s / 1e9, against {@link FmaPeakBench} on the same
 * machine. Run with {@code -jvmArgsAppend -XX:ActiveProcessorCount=1} for one core. The secondary results
 * {@code gflop} / {@code cpuSeconds} ({@link CpuRate}) give the rate per CPU-second, which a loaded machine skews less.
 */
@State(Scope.Thread)
@BenchmarkMode(Mode.Throughput)
@OutputTimeUnit(TimeUnit.SECONDS)
@Warmup(iterations = 3, time = 2)
@Measurement(iterations = 5, time = 2)
@Fork(value = 1, jvmArgsAppend = {"--add-modules", "jdk.incubator.vector"})
public class MatmulBench {
    /** rows N x in I x out O: the 40M model's (seq 256 x 4) q/k/v/o, gate/up, down; 7B's (2048 rows) o and up. */
    @Param({"1024x512x512", "1024x512x1376", "1024x1376x512", "2048x3584x3584", "2048x3584x18944"})
    public String shape;

    private int n, in, out;
    private float[] x, w, y, dy, dx, dw;

    @Setup(Level.Trial)
    public void setUp() {
        String[] p = shape.split("x");
        n = Integer.parseInt(p[0]);
        in = Integer.parseInt(p[1]);
        out = Integer.parseInt(p[2]);
        SplittableRandom r = new SplittableRandom(1);
        x = fill(r, n * in);
        w = fill(r, out * in);
        dy = fill(r, n * out);
        y = new float[n * out];
        dx = new float[n * in];
        dw = new float[out * in];
    }

    private static float[] fill(SplittableRandom r, int count) {
        float[] v = new float[count];
        for (int i = 0; i < count; i++) {
            v[i] = (float) r.nextDouble(-1, 1);
        }
        return v;
    }

    @Benchmark
    public float[] forward(CpuRate rate) {
        long start = CpuRate.now();
        CpuMatmul.forward(y, 0, x, 0, w, 0, null, 0, n, in, out);
        rate.add(2.0 * n * in * out, start);
        return y;
    }

    @Benchmark
    public float[] inputGradient(CpuRate rate) {
        long start = CpuRate.now();
        CpuMatmul.backwardInput(dx, 0, dy, 0, w, 0, n, in, out);
        rate.add(2.0 * n * in * out, start);
        return dx;
    }

    @Benchmark
    public float[] weightGradient(CpuRate rate) {
        long start = CpuRate.now();
        CpuMatmul.backwardWeight(dw, 0, null, 0, dy, 0, x, 0, n, in, out);
        rate.add(2.0 * n * in * out, start);
        return dw;
    }
}
