package io.fsdp4j.config;

import io.fsdp4j.UserError;
import java.util.LinkedHashMap;
import java.util.Map;

/**
 * {@code attention.*}: how attention is computed on GPUs (CPU ranks have one engine).
 *
 * @param kernel        {@code attention.kernel}: {@code auto}, {@code fsdp4j} or {@code cudnn} ({@link AttentionKernel}).
 *                      cuDNN's engine takes causal grouped-query attention over unpacked sequences (with or without a
 *                      sliding window) in bf16; packed documents, ALiBi, BLOOM's per-head layout and Gemma 2's soft cap
 *                      stay on fsdp4j's kernels under {@code auto}, and are an error under {@code cudnn}
 * @param deterministic {@code attention.deterministic}: the backward sums in a fixed order, so that a rerun gives the
 *                      same bits: fsdp4j's two backward kernels at every shape (Hopper's one-kernel backward and cuDNN's
 *                      add dq's parts in no fixed order); under {@code auto} cuDNN keeps the forwards it is faster at.
 *                      False by default; true with {@code attention.kernel: cudnn} is an error
 */
public record AttentionSection(AttentionKernel kernel, boolean deterministic) {
    public AttentionSection {
        Check.present("attention.kernel", kernel);
        requireDeterministicEngine(kernel, deterministic);
    }

    /** The one-line error of {@code attention.deterministic: true} with {@code attention.kernel: cudnn}. */
    public static void requireDeterministicEngine(AttentionKernel kernel, boolean deterministic) {
        if (deterministic && kernel == AttentionKernel.CUDNN) {
            throw new UserError("attention.deterministic is true, but attention.kernel is cudnn, whose backward adds "
                    + "in no fixed order: set attention.kernel: auto or fsdp4j");
        }
    }

    public static AttentionSection defaults() {
        return new AttentionSection(AttentionKernel.AUTO, false);
    }

    static AttentionSection bind(ConfigSection s) {
        var kernel = s.choice("kernel", AttentionKernel.class, defaults().kernel());
        boolean deterministic = s.bool("deterministic", defaults().deterministic());
        s.finish();
        return new AttentionSection(kernel, deterministic);
    }

    Map<String, Object> toMap() {
        var m = new LinkedHashMap<String, Object>();
        m.put("kernel", kernel.spelling());
        m.put("deterministic", deterministic);
        return m;
    }
}
