package io.fsdp4j;

import static com.tngtech.archunit.lang.syntax.ArchRuleDefinition.noClasses;
import static com.tngtech.archunit.library.Architectures.layeredArchitecture;

import com.tngtech.archunit.core.domain.JavaClasses;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * The arrows between packages run one way: commands on top, then the training loop and the tools beside it, then job
 * start, then the engine, then collectives and the data (which reads the models' batch conventions), then models,
 * then the backends, then what a step measured (report), the config's values, and tensors and formats. A lower
 * package that imports a higher one fails here, naming both classes; so does a package that imports one above it
 * inside its own layer ({@link #arrowsInsideALayerRunOneWay}). The layers and what each may use are listed once
 * below; a package's {@code package-info.java} says the same in words ("May use: ...").
 */
class LayeringTest {
    private static JavaClasses classes;

    @BeforeAll
    static void importMainClasses() {
        classes = MainClasses.imported();
    }

    @Test
    void layersUseOnlyTheLayersBelowThem() {
        layeredArchitecture().consideringOnlyDependenciesInLayers()
                .layer("commands").definedBy("io.fsdp4j.cli..")
                .layer("loop").definedBy("io.fsdp4j.train..", "io.fsdp4j.eval..")
                .layer("tools").definedBy("io.fsdp4j.plan..", "io.fsdp4j.doctor..", "io.fsdp4j.preflight..")
                .layer("job").definedBy("io.fsdp4j.job..")
                .layer("engine").definedBy("io.fsdp4j.fsdp..", "io.fsdp4j.checkpoint..", "io.fsdp4j.optim..")
                .layer("comm").definedBy("io.fsdp4j.comm..")
                .layer("data").definedBy("io.fsdp4j.data..", "io.fsdp4j.tokenizer..")
                .layer("models").definedBy("io.fsdp4j.model..", "io.fsdp4j.hf..")
                .layer("backends").definedBy("io.fsdp4j.backend..", "io.fsdp4j.cuda..")
                .layer("report").definedBy("io.fsdp4j.report..")
                .layer("config").definedBy("io.fsdp4j.config..")
                .layer("formats").definedBy("io.fsdp4j.tensor..", "io.fsdp4j.safetensors..")
                .whereLayer("commands").mayNotBeAccessedByAnyLayer()
                .whereLayer("loop").mayOnlyBeAccessedByLayers("commands")
                .whereLayer("tools").mayOnlyBeAccessedByLayers("commands", "loop")
                .whereLayer("job").mayOnlyBeAccessedByLayers("commands", "loop", "tools")
                .whereLayer("engine").mayOnlyBeAccessedByLayers("commands", "loop", "tools")
                .whereLayer("comm").mayOnlyBeAccessedByLayers("commands", "loop", "tools", "job", "engine")
                .whereLayer("data").mayOnlyBeAccessedByLayers("commands", "loop", "tools", "job", "engine")
                .whereLayer("models").mayOnlyBeAccessedByLayers("commands", "loop", "tools", "job", "engine", "data")
                .whereLayer("backends").mayOnlyBeAccessedByLayers("commands", "loop", "tools", "job", "engine", "comm",
                        "models", "data")
                .whereLayer("report").mayOnlyBeAccessedByLayers("commands", "loop", "tools", "job", "engine", "comm",
                        "models", "data", "backends")
                .whereLayer("config").mayOnlyBeAccessedByLayers("commands", "loop", "tools", "job", "engine", "comm",
                        "models", "data", "backends", "report")
                .check(classes);
    }

    /** Inside a layer: the package on the left may import the ones on the right, never the reverse. */
    @Test
    void arrowsInsideALayerRunOneWay() {
        String[][] above = {
            {"io.fsdp4j.train..", "io.fsdp4j.eval.."},
            {"io.fsdp4j.preflight..", "io.fsdp4j.doctor..", "io.fsdp4j.plan.."},
            {"io.fsdp4j.checkpoint..", "io.fsdp4j.fsdp..", "io.fsdp4j.optim.."}, // fsdp's shards are optim's TrainableShards
            {"io.fsdp4j.data..", "io.fsdp4j.tokenizer.."},
            {"io.fsdp4j.hf..", "io.fsdp4j.model.."},
            {"io.fsdp4j.backend", "io.fsdp4j.cuda.."},
            {"io.fsdp4j.safetensors..", "io.fsdp4j.tensor.."},
        };
        for (String[] order : above) {
            for (int lower = 1; lower < order.length; lower++) {
                for (int higher = 0; higher < lower; higher++) {
                    noClasses().that().resideInAPackage(order[lower]).should().dependOnClassesThat()
                            .resideInAPackage(order[higher]).check(classes);
                }
            }
        }
    }

    @Test
    void noPackageIsNamedLikeBuildOutput() {
        noClasses().should().resideInAnyPackage("..dist..", "..build..", "..out..").check(classes);
    }
}
