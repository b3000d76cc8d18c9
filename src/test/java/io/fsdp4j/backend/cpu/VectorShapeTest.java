package io.fsdp4j.backend.cpu;

import static com.tngtech.archunit.lang.syntax.ArchRuleDefinition.noClasses;

import com.tngtech.archunit.base.DescribedPredicate;
import com.tngtech.archunit.core.domain.JavaClasses;
import com.tngtech.archunit.lang.ArchRule;
import io.fsdp4j.MainClasses;
import java.util.List;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * Every Vector API kernel in the process uses one vector shape: the preferred one. The API's vector classes share
 * their methods' call profiles across every caller (FloatVector.intoArray is one method for all of them). Once two
 * shapes of FloatVector have passed through such a method (a 128-bit copy beside the 512-bit register tile), its
 * profile is bimorphic, and a kernel that C2 compiles while it is so (which depends on the order in which the JIT's
 * queue reaches them: a race) keeps its vectors in heap objects instead of registers: each load and store
 * allocates. On this project's machine one run in five of the demo's shape ran about seven times slower for the
 * whole run (4,400 tok/s against 31,000, with 1.6 million page faults against 0.26 million; docs/benchmarks.md,
 * 2026-11-26, eighth session), until the 128-bit copy became a System.arraycopy.
 */
class VectorShapeTest {
    private static final List<String> FIXED_SHAPES = List.of("SPECIES_64", "SPECIES_128", "SPECIES_256",
            "SPECIES_512", "SPECIES_MAX");
    private static final List<String> VECTOR_CLASSES = List.of("FloatVector", "DoubleVector", "IntVector",
            "LongVector", "ShortVector", "ByteVector");
    private static JavaClasses classes;

    @BeforeAll
    static void importMainClasses() {
        classes = MainClasses.imported();
    }

    @Test
    void noKernelNamesAFixedShape() {
        for (String vector : VECTOR_CLASSES) {
            for (String shape : FIXED_SHAPES) {
                ArchRule rule = noClasses().should().accessField("jdk.incubator.vector." + vector, shape)
                        .because("a second vector shape makes the Vector API's call profiles bimorphic and C2 may"
                                + " then box the kernels' vectors (use SPECIES_PREFERRED)");
                rule.check(classes);
            }
        }
    }

    @Test
    void noKernelMakesASpeciesOfAnotherShape() {
        noClasses().should().callMethodWhere(DescribedPredicate.describe("a call that makes another shape", call -> {
            String owner = call.getTarget().getOwner().getName();
            String name = call.getTarget().getName();
            return owner.startsWith("jdk.incubator.vector.")
                    && (name.equals("withShape") || name.equals("forBitSize") || name.equals("forVectorBitSize")
                            || name.equals("forIndexBitSize")
                            || (owner.equals("jdk.incubator.vector.VectorSpecies") && name.equals("of")));
        })).because("every kernel uses the preferred shape (see VectorShapeTest)").check(classes);
    }
}
