package io.fsdp4j.config;

import java.util.LinkedHashMap;
import java.util.Map;

/**
 * {@code matmul.*}: how matrix products are computed on GPUs (CPU ranks have one kernel).
 *
 * @param algorithm {@code matmul.algorithm}: {@code timed} or {@code heuristic} ({@link MatmulAlgorithm}). Timed
 *                  picks each product's fastest algorithm by the device's clock, so two runs may pick differently
 *                  where candidates are close and their sums then differ in the last bits; {@code heuristic} always
 *                  takes cuBLASLt's first choice
 */
public record MatmulSection(MatmulAlgorithm algorithm) {
    public MatmulSection {
        Check.present("matmul.algorithm", algorithm);
    }

    public static MatmulSection defaults() {
        return new MatmulSection(MatmulAlgorithm.TIMED);
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
