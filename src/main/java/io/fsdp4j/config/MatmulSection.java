package io.fsdp4j.config;

import java.util.LinkedHashMap;
import java.util.Map;

/**
 * {@code matmul.*}: how matrix products are computed on GPUs (CPU ranks have one kernel).
 *
 * @param algorithm {@code matmul.algorithm}: {@code heuristic} (default) or {@code timed} ({@link MatmulAlgorithm}).
 *                  Heuristic always takes cuBLASLt's first choice; timed picks each product's fastest algorithm by
 *                  the device's clock, so two runs may pick differently where candidates are close and their sums
 *                  then differ in the last bits. On an H200 at Qwen2.5-7B's shapes timed found faster algorithms for
 *                  9 of 16 products (1.5-2.8% less time a call, measured at their first use) and the step's rate did
 *                  not change beyond its noise (docs/benchmarks.md), hence not the default
 */
public record MatmulSection(MatmulAlgorithm algorithm) {
    public MatmulSection {
        Check.present("matmul.algorithm", algorithm);
    }

    public static MatmulSection defaults() {
        return new MatmulSection(MatmulAlgorithm.HEURISTIC);
    }

    static MatmulSection bind(ConfigSection s) {
        var algorithm = s.choice("algorithm", MatmulAlgorithm.class, defaults().algorithm());
        s.finish();
        return new MatmulSection(algorithm);
    }

    Map<String, Object> toMap() {
        var m = new LinkedHashMap<String, Object>();
        m.put("algorithm", algorithm.spelling());
        return m;
    }
}
