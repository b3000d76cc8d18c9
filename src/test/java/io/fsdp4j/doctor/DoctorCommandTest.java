package io.fsdp4j.doctor;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.fsdp4j.cli.Main;
import io.fsdp4j.cuda.NativeLibraries;
import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import org.junit.jupiter.api.Test;

/** {@code fsdp4j doctor} wherever the suite runs: without a GPU it still reports, judges the CPU backend, exits 0. */
class DoctorCommandTest {

    private record Run(int status, String out, String err) {}

    private static Run doctor(String... args) {
        var out = new ByteArrayOutputStream();
        var err = new ByteArrayOutputStream();
        String[] all = new String[args.length + 1];
        all[0] = "doctor";
        System.arraycopy(args, 0, all, 1, args.length);
        int status = Main.execute(all, new PrintStream(out, true, StandardCharsets.UTF_8),
                new PrintStream(err, true, StandardCharsets.UTF_8), false);
        return new Run(status, out.toString(StandardCharsets.UTF_8), err.toString(StandardCharsets.UTF_8));
    }

    @Test
    void jsonNamesEveryLibraryAndGivesAVerdict() throws Exception {
        Run run = doctor("--json", "--no-tests");
        JsonNode report = new ObjectMapper().readTree(run.out());
        assertThat(run.err()).isEmpty();
        assertThat(report.get("java").get("version").asText()).isEqualTo(Runtime.version().toString());
        assertThat(report.get("cpu").get("cores").asInt()).isEqualTo(Runtime.getRuntime().availableProcessors());
        assertThat(report.get("libraries")).hasSize(NativeLibraries.Library.values().length);
        for (JsonNode library : report.get("libraries")) {
            // each either has a path and a version, or says why it was not found
            assertThat(library.hasNonNull("path") ? library.get("version").asText() : library.get("error").asText())
                    .isNotBlank();
        }
        String status = report.get("verdict").get("status").asText();
        if (NativeLibraries.cudaAvailable()) {
            assertThat(status).isIn("ok", "degraded");
            assertThat(report.get("gpus")).isNotEmpty();
        } else {
            assertThat(status).isEqualTo("cpu");
            assertThat(run.status()).isZero();
            assertThat(report.get("no_gpu").asText()).isEqualTo(NativeLibraries.whyCudaUnavailable().orElseThrow());
            assertThat(report.get("verdict").get("reason").asText()).startsWith("no GPU found")
                    .contains("CPU backend");
        }
    }

    @Test
    void linesSayWhatWasFoundAndEndWithTheVerdict() {
        Run run = doctor("--no-tests");
        assertThat(run.out()).contains("fsdp4j:", "JDK:", "CPU:", "native libraries", "NCCL", "NVML");
        String last = run.out().strip().lines().reduce((a, b) -> b).orElseThrow();
        assertThat(last).startsWith("verdict: ");
        if (!NativeLibraries.cudaAvailable()) {
            assertThat(run.out()).contains("GPUs:     no GPU found: ");
            assertThat(last).startsWith("verdict: cpu: no GPU found");
            assertThat(run.status()).isZero();
        }
    }
}
