package io.fsdp4j.data;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.fsdp4j.UserError;
import java.io.IOException;
import java.net.URISyntaxException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * Parquet rows equal pyarrow's reading of the same files (src/test/resources/parquet, written by
 * tools/chat-fixtures/make_parquet.py): snappy and zstd, dictionary and plain encodings, data pages v1 and v2,
 * nullable columns, several row groups, and messages as a list of structs.
 */
class ParquetRowsTest {
    private static final ObjectMapper JSON = new ObjectMapper();

    @TempDir
    Path tmp;

    static Path resource(String name) {
        try {
            return Path.of(ParquetRowsTest.class.getResource("/parquet/" + name).toURI());
        } catch (URISyntaxException e) {
            throw new IllegalStateException(e);
        }
    }

    @ParameterizedTest
    @ValueSource(strings = {"conversations-snappy", "conversations-zstd", "columns-snappy", "columns-zstd",
            "columns-v2"})
    void rowsEqualPyarrows(String name) throws IOException {
        List<JsonNode> expected = new ArrayList<>();
        for (String line : Files.readAllLines(resource(name + ".expected.jsonl"), StandardCharsets.UTF_8)) {
            expected.add(JSON.readTree(line));
        }
        List<JsonNode> got = new ArrayList<>();
        List<Long> numbers = new ArrayList<>();
        ParquetRows.read(resource(name + ".parquet"), (row, number) -> {
            try {
                got.add(JSON.readTree(JSON.writeValueAsString(row))); // numbers as JSON text reads them
            } catch (IOException e) {
                throw new java.io.UncheckedIOException(e);
            }
            numbers.add(number);
        });
        assertThat(got).containsExactlyElementsOf(expected);
        assertThat(numbers.getLast()).isEqualTo(expected.size());
    }

    @Test
    void formatsAreToldFromTheColumns() {
        assertThat(DatasetFormat.detect(resource("conversations-zstd.parquet"))).isEqualTo(DatasetFormat.MESSAGES);
        assertThat(DatasetFormat.detect(resource("columns-snappy.parquet"))).isEqualTo(DatasetFormat.TEXT);
    }

    @Test
    void notParquetIsOneLine() throws IOException {
        Path bad = Files.writeString(tmp.resolve("bad.parquet"), "PAR1 not really");
        assertThatThrownBy(() -> ParquetRows.read(bad, (r, n) -> {})).isInstanceOf(UserError.class)
                .hasMessage("data file " + bad + " is not a Parquet file (no PAR1 at its start and end)");
    }
}
