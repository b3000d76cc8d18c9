package io.fsdp4j.backend.cpu;

import jdk.incubator.vector.FloatVector;
import jdk.incubator.vector.IntVector;
import jdk.incubator.vector.VectorOperators;

/**
 * {@link Exp#exp} on a vector (loaded only when the JVM has jdk.incubator.vector): the same operations in the same
 * order, lane by lane, hence the same bits as the scalar form.
 */
final class VectorExp {
    private VectorExp() {}

    static FloatVector exp(FloatVector x) {
        x = x.max(Exp.LOW).min(Exp.HIGH);
        FloatVector shifted = x.fma(Exp.LOG2E, Exp.MAGIC);
        IntVector n = shifted.viewAsIntegralLanes().sub(Exp.MAGIC_BITS);
        FloatVector nf = shifted.sub(Exp.MAGIC);
        FloatVector r = nf.fma(x.broadcast(-Exp.LN2_HI), x);
        r = nf.fma(x.broadcast(-Exp.LN2_LO), r);
        FloatVector p = r.fma(x.broadcast(Exp.P0), x.broadcast(Exp.P1));
        p = p.fma(r, x.broadcast(Exp.P2));
        p = p.fma(r, x.broadcast(Exp.P3));
        p = p.fma(r, x.broadcast(Exp.P4));
        p = p.fma(r, x.broadcast(Exp.P5));
        p = p.fma(r.mul(r), r).add(1f);
        IntVector half = n.lanewise(VectorOperators.ASHR, 1);
        FloatVector s1 = half.add(127).lanewise(VectorOperators.LSHL, 23).viewAsFloatingLanes();
        FloatVector s2 = n.sub(half).add(127).lanewise(VectorOperators.LSHL, 23).viewAsFloatingLanes();
        return p.mul(s1).mul(s2);
    }
}
