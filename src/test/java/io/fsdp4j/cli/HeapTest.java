package io.fsdp4j.cli;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The Java heap of CPU ranks: bin/fsdp4j sizes it from the machine's memory, a run that cannot fit is refused
 * before its first step, and a heap exhausted mid-run is one line that says what to set.
 */
class HeapTest {
    @TempDir
    Path tmp;

    private static String heapOptions(String javaOpts) throws IOException, InterruptedException {
        var builder = new ProcessBuilder("bash", "-c", "source bin/lib/heap.sh && fsdp4j_heap_options")
                .redirectErrorStream(true);
        builder.environment().remove("FSDP4J_JAVA_OPTS");
        if (javaOpts != null) {
            builder.environment().put("FSDP4J_JAVA_OPTS", javaOpts);
        }
        Process p = builder.start();
        assertThat(p.waitFor(10, TimeUnit.SECONDS)).isTrue();
        return new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8).strip();
    }

    @Test
    void theScriptSizesTheHeapFromTheMachineUnlessFsdp4jJavaOptsDoes() throws Exception {
        assertThat(heapOptions(null)).isEqualTo("-XX:MaxRAMPercentage=75");
        assertThat(heapOptions("-XX:+UseZGC")).isEqualTo("-XX:MaxRAMPercentage=75");
        assertThat(heapOptions("-Xmx24g")).isEmpty();
        assertThat(heapOptions("-XX:MaxRAMPercentage=50")).isEmpty();
        assertThat(Files.readString(Path.of("bin/fsdp4j"))).contains("source \"$ROOT/bin/lib/heap.sh\"")
                .contains("${heap[@]+\"${heap[@]}\"}");
    }

    @Test
    void aModelTooLargeForTheHeapIsRefusedBeforeItsFirstStep() throws IOException {
        Path data = Files.write(tmp.resolve("d.jsonl"), List.of("{\"input_ids\": [1, 2, 3, 4, 5, 6, 7, 8, 9]}",
                "{\"input_ids\": [1, 2, 3, 4, 5, 6, 7, 8, 9]}"));
        // 7.6 billion parameters x 16 bytes: 113 GiB, more than any test JVM's heap
        CommandsEndToEndTest.run("train", "--set", "model.preset=qwen2.5-7b", "--set", "data.train=" + data,
                "--set", "data.seq_len=8", "--set", "dist.device=cpu", "--set", "dist.ranks=1",
                "--set", "train.batch_size=1", "--set", "run.dir=" + tmp.resolve("run"))
                .failsWith("this run needs about ", " GiB of Java heap (7,615,616,512 parameters x 16 bytes",
                        "set FSDP4J_JAVA_OPTS=-Xmx");
        assertThat(tmp.resolve("run")).doesNotExist(); // refused before anything was written
    }

    @Test
    void aHeapExhaustedMidRunIsOneLineWithWhatToSet() {
        var err = new ByteArrayOutputStream();
        int status = new ErrorHandler(new PrintStream(err, true, StandardCharsets.UTF_8), false)
                .report(new RuntimeException("rank 0 failed", new OutOfMemoryError("Java heap space")));
        String text = err.toString(StandardCharsets.UTF_8);
        assertThat(status).isEqualTo(1);
        assertThat(text.lines().toList()).hasSize(1);
        assertThat(text).startsWith("error: out of Java heap memory (Java heap space): the heap is ")
                .contains("FSDP4J_JAVA_OPTS=-Xmx").contains("dist.ranks").doesNotContain("internal error");
    }
}
