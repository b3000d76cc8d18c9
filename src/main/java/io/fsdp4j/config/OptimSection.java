package io.fsdp4j.config;

import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * {@code optim.*}: AdamW with PyTorch's semantics (decoupled weight decay: {@code p -= lr * weightDecay * p}).
 *
 * @param lr          {@code optim.lr}: the peak learning rate, > 0
 * @param beta1       first of {@code optim.betas}, in [0, 1)
 * @param beta2       second of {@code optim.betas}, in [0, 1)
 * @param eps         {@code optim.eps}: added to the root of the second moment, > 0
 * @param weightDecay {@code optim.weight_decay}: >= 0
 * @param decay       {@code optim.decay}: which parameters decay
 * @param maxGradNorm {@code optim.max_grad_norm}: clip the global gradient norm (over all shards) to this; 0 is off
 */
public record OptimSection(double lr, double beta1, double beta2, double eps, double weightDecay, DecayRule decay,
                           double maxGradNorm) {
    public OptimSection {
        Check.positive("optim.lr", lr);
        Check.inRange("optim.betas", beta1, 0, 1, true);
        Check.inRange("optim.betas", beta2, 0, 1, true);
        Check.positive("optim.eps", eps);
        Check.nonNegative("optim.weight_decay", weightDecay);
        Check.present("optim.decay", decay);
        Check.nonNegative("optim.max_grad_norm", maxGradNorm);
    }

    public static OptimSection defaults() {
        return new OptimSection(3e-3, 0.9, 0.95, 1e-8, 0.1, DecayRule.MATRICES, 1.0);
    }

    /** A fine-tune's (model.path): the peak learning rate of Trainer's, axolotl's and torchtune's examples. */
    public static OptimSection fineTuneDefaults() {
        return new OptimSection(2e-5, 0.9, 0.95, 1e-8, 0.1, DecayRule.MATRICES, 1.0);
    }

    static OptimSection bind(ConfigSection s, OptimSection d) {
        double lr = s.number("lr", d.lr());
        double[] betas = s.numbers("betas", new double[] {d.beta1(), d.beta2()});
        double eps = s.number("eps", d.eps());
        double weightDecay = s.number("weight_decay", d.weightDecay());
        var decay = s.choice("decay", DecayRule.class, d.decay());
        double maxGradNorm = s.number("max_grad_norm", d.maxGradNorm());
        s.finish();
        return new OptimSection(lr, betas[0], betas[1], eps, weightDecay, decay, maxGradNorm);
    }

    Map<String, Object> toMap() {
        var m = new LinkedHashMap<String, Object>();
        m.put("lr", lr);
        m.put("betas", List.of(beta1, beta2));
        m.put("eps", eps);
        m.put("weight_decay", weightDecay);
        m.put("decay", decay.spelling());
        m.put("max_grad_norm", maxGradNorm);
        return m;
    }
}
