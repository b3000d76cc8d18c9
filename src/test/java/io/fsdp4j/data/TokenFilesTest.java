package io.fsdp4j.data;

import static io.fsdp4j.data.DataFiles.write;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import io.fsdp4j.UserError;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.function.Consumer;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** Token files are checked whole when opened: a corrupt meta.json or a truncated or altered .bin is refused. */
class TokenFilesTest {
    private static final ObjectMapper JSON = new ObjectMapper();

    @TempDir
    Path dir;
    Path files;

    @BeforeEach
    void prepare() {
        Path input = write(dir, "t.txt", "one\n\ntwo two\n\nthree three three\n");
        files = dir.resolve("tokens");
        Prepare.run(new Prepare.Options(input, DatasetFormat.TEXT, "bytes", files, 0, 0.34, 5,
                InstructionPrompt.COMPACT, false));
    }

    @Test
    void theFilesAreLittleEndianWithDocumentOffsets() throws IOException {
        ByteBuffer tokens = littleEndian(files.resolve("tokens.bin"));
        ByteBuffer docs = littleEndian(files.resolve("documents.bin"));
        assertThat(tokens.getInt(0)).isEqualTo('o');
        assertThat(tokens.getInt(3 * 4)).isZero(); // EOS
        assertThat(docs.getLong(0)).isZero();
        assertThat(docs.getLong(8)).isEqualTo(4);
        assertThat(docs.getLong(16)).isEqualTo(4 + 8);
        assertThat(docs.getLong(24)).isEqualTo(4 + 8 + 18);
        assertThat(docs.capacity()).isEqualTo(4 * 8);
        TokenFiles opened = TokenFiles.open(files);
        assertThat(opened.meta().evalDocuments()).hasSize(1);
        assertThat(opened.documents(Split.TRAIN)).hasSize(2).doesNotContain(opened.meta().evalDocuments()[0]);
    }

    private static ByteBuffer littleEndian(Path file) throws IOException {
        return ByteBuffer.wrap(Files.readAllBytes(file)).order(ByteOrder.LITTLE_ENDIAN);
    }

    private void editMeta(Consumer<ObjectNode> edit) throws IOException {
        ObjectNode meta = (ObjectNode) JSON.readTree(files.resolve("meta.json").toFile());
        edit.accept(meta);
        Files.writeString(files.resolve("meta.json"), meta.toString());
    }

    private void refused(String message) {
        assertThatThrownBy(() -> TokenFiles.open(files)).isInstanceOf(UserError.class)
                .hasMessageContaining(message).message().doesNotContain("\n");
    }

    @Test
    void aMetaJsonThatIsNotJsonIsRefused() throws IOException {
        Files.writeString(files.resolve("meta.json"), "{\"kind\": \"fsdp4j-token-files\", ");
        refused(files.resolve("meta.json") + " is not valid JSON");
    }

    @Test
    void aMissingMetaJsonIsRefused() throws IOException {
        Files.delete(files.resolve("meta.json"));
        refused("has no meta.json");
    }

    @Test
    void otherKindsAndVersionsAreRefused() throws IOException {
        editMeta(m -> m.put("kind", "something"));
        refused("is not the meta.json of fsdp4j token files");
        editMeta(m -> m.put("kind", "fsdp4j-token-files").put("version", 2));
        refused("token files of version 2");
    }

    @Test
    void missingOrMistypedFieldsAreRefused() throws IOException {
        editMeta(m -> m.remove("tokens"));
        refused("\"tokens\" must be an integer");
    }

    @Test
    void countsThatDisagreeWithTheFilesAreRefused() throws IOException {
        editMeta(m -> m.put("tokens", 31));
        refused("tokens.bin has 120 bytes, but meta.json says 124");
        editMeta(m -> m.put("tokens", 30).put("documents", 4));
        refused("documents.bin has 32 bytes, but meta.json says 40");
        editMeta(m -> m.put("documents", 3).put("loss_tokens", 29));
        refused("it has 30 labels with a loss, meta.json says 29");
        editMeta(m -> m.put("loss_tokens", 30).put("vocab_size", 100));
        refused("is id 111, outside the vocabulary of 100");
        editMeta(m -> m.put("vocab_size", 256).putArray("eval_documents").add(2).add(1));
        refused("\"eval_documents\" must hold ascending indices below 3");
    }

    @Test
    void aTruncatedBinIsRefused() throws IOException {
        try (FileChannel ch = FileChannel.open(files.resolve("labels.bin"), StandardOpenOption.WRITE)) {
            ch.truncate(ch.size() - 4);
        }
        refused("labels.bin has 116 bytes, but meta.json says 120 (truncated?)");
    }

    @Test
    void aMissingBinIsRefused() throws IOException {
        Files.delete(files.resolve("tokens.bin"));
        refused("tokens.bin is missing");
    }

    @Test
    void offsetsThatDoNotRiseAreRefused() throws IOException {
        try (FileChannel ch = FileChannel.open(files.resolve("documents.bin"), StandardOpenOption.WRITE)) {
            ch.write(ByteBuffer.allocate(8).order(ByteOrder.LITTLE_ENDIAN).putLong(0, 20), 8);
        }
        refused("documents.bin does not match meta.json: document 1 ends at 12 (after 20");
    }

    @Test
    void anIdOutsideTheVocabularyIsRefused() throws IOException {
        try (FileChannel ch = FileChannel.open(files.resolve("tokens.bin"), StandardOpenOption.WRITE)) {
            ch.write(ByteBuffer.allocate(4).order(ByteOrder.LITTLE_ENDIAN).putInt(0, 300), 8);
        }
        refused("tokens.bin does not match meta.json: token 2 is id 300, outside the vocabulary of 256");
    }
}
