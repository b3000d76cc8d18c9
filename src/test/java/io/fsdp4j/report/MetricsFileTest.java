package io.fsdp4j.report;

import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.fsdp4j.UserError;
import java.nio.file.Path;
import java.util.Map;
import org.junit.jupiter.api.Test;

/** A metrics file whose disk fills during the run: the error names the file (it was an internal error without it). */
class MetricsFileTest {
    @Test
    void aWriteThatFailsNamesTheFile() {
        Path full = Path.of("/dev/full"); // Linux: every write fails with ENOSPC, as on a full disk
        MetricsFile file = MetricsFile.create(full);
        assertThatThrownBy(() -> file.write(Map.of("step", 1, "loss", 2.5))).isInstanceOf(UserError.class)
                .hasMessage("cannot write metrics file /dev/full: No space left on device");
    }
}
