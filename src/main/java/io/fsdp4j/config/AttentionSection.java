package io.fsdp4j.config;

import java.util.LinkedHashMap;
import java.util.Map;

/**
 * {@code attention.*}: how attention is computed on GPUs (CPU ranks have one engine).
 *
 * @param kernel {@code attention.kernel}: {@code auto}, {@code fsdp4j} or {@code cudnn} ({@link AttentionKernel}).
 *               cuDNN's engine takes causal grouped-query attention over unpacked sequences (with or without a
 *               sliding window) in bf16; packed documents, ALiBi, BLOOM's per-head layout and Gemma 2's soft cap
 *               stay on fsdp4j's kernels under {@code auto}, and are an error under {@code cudnn}
 */
public record AttentionSection(AttentionKernel kernel) {
    public AttentionSection {
        Check.present("attention.kernel", kernel);
    }

    public static AttentionSection defaults() {
        return new AttentionSection(AttentionKernel.AUTO);
    }

    static AttentionSection bind(ConfigSection s) {
        var kernel = s.choice("kernel", AttentionKernel.class, defaults().kernel());
        s.finish();
        return new AttentionSection(kernel);
    }

    Map<String, Object> toMap() {
        var m = new LinkedHashMap<String, Object>();
        m.put("kernel", kernel.spelling());
        return m;
    }
}
