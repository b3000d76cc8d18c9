package io.fsdp4j.train;

import static org.assertj.core.api.Assertions.assertThat;

import io.fsdp4j.config.TrainConfig;
import io.fsdp4j.model.Flops;
import io.fsdp4j.model.ModelConfig;
import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.List;
import org.junit.jupiter.api.Test;

/** The FLOPs a run's MFU counts a token: attention within each packed document, not across the whole sequence. */
class ReportedFlopsTest {
    private static double flopsPerToken(TrainConfig config, ModelConfig model, int documentTokens) {
        try (var out = new PrintStream(new ByteArrayOutputStream(), true, StandardCharsets.UTF_8);
             var report = new RunReport(config, model, 1_000_000, 1, documentTokens, null, step -> false, false,
                     out)) {
            return report.flopsPerToken();
        }
    }

    @Test
    void packedDocumentsCountTheirOwnAttention() {
        ModelConfig model = ModelConfig.preset("tiny");
        TrainConfig config = TrainConfig.load(null, List.of("model.preset=tiny", "data.seq_len=4096"));
        assertThat(flopsPerToken(config, model, 0)).isEqualTo(Flops.perToken(model, 1_000_000, 4096));
        assertThat(flopsPerToken(config, model, 1024)).isEqualTo(Flops.perToken(model, 1_000_000, 1024))
                .isLessThan(flopsPerToken(config, model, 0));
        // documents as long as the sequence, or longer: the sequence
        assertThat(flopsPerToken(config, model, 4096)).isEqualTo(Flops.perToken(model, 1_000_000, 4096));
    }
}
