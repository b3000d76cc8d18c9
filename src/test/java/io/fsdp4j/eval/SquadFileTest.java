package io.fsdp4j.eval;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.fsdp4j.UserError;
import io.fsdp4j.data.SquadPrompt;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** Reading SQuAD v1.1 files, and the one prompt format. */
class SquadFileTest {
    @TempDir
    Path tmp;

    private Path file(String json) throws IOException {
        return Files.writeString(tmp.resolve("squad.json"), json.replace('\'', '"'));
    }

    @Test
    void thePromptFormatIsFixed() {
        assertThat(SquadPrompt.prompt("Oslo is in Norway.", "Where is Oslo?"))
                .isEqualTo("Context: Oslo is in Norway.\nQuestion: Where is Oslo?\nAnswer:");
        assertThat(SquadPrompt.completion("Norway")).isEqualTo(" Norway");
        assertThat(new SquadQuestion("1", "c", "q", List.of("a")).prompt()).isEqualTo(SquadPrompt.prompt("c", "q"));
    }

    @Test
    void questionsComeInFileOrderWithEveryAnswer() throws IOException {
        Path f = file("""
                {'version': '1.1', 'data': [
                  {'title': 'A', 'paragraphs': [
                    {'context': 'C1', 'qas': [
                      {'id': 'a1', 'question': 'Q1', 'answers': [{'answer_start': 0, 'text': 'x'}, {'answer_start': 1, 'text': 'y'}]},
                      {'id': 7, 'question': 'Q2', 'answers': [{'text': 'z'}]}]},
                    {'context': 'C2', 'qas': []}]},
                  {'title': 'B', 'paragraphs': [
                    {'context': 'C3', 'qas': [{'id': 'b1', 'question': 'Q3', 'answers': [{'text': 'w'}]}]}]}]}
                """);
        assertThat(SquadFile.read(f)).containsExactly(
                new SquadQuestion("a1", "C1", "Q1", List.of("x", "y")),
                new SquadQuestion("7", "C1", "Q2", List.of("z")),
                new SquadQuestion("b1", "C3", "Q3", List.of("w")));
    }

    @Test
    void aMissingOrMistypedFieldIsNamedWithItsPlace() throws IOException {
        String qa = "{'id': 'q', 'question': 'Q', 'answers': [{'text': 'a'}]}";
        String good = "{'context': 'C', 'qas': [" + qa + "]}";
        fails("{'version': '1.1'}", "has no \"data\"");
        fails("{'data': {}}", "\"data\" of the file must be an array");
        fails("{'data': [{'title': 'T'}]}", "data[0] has no \"paragraphs\"");
        fails("{'data': [{'paragraphs': [" + good + ", {'qas': []}]}]}", "data[0].paragraphs[1] has no \"context\"");
        fails("{'data': [{'paragraphs': [{'context': 'C'}]}]}", "data[0].paragraphs[0] has no \"qas\"");
        fails("{'data': [{'paragraphs': [" + good + ", {'context': 'C', 'qas': [{'id': 'x', 'answers': []}]}]}]}",
                "data[0].paragraphs[1].qas[0] has no \"question\"");
        fails("{'data': [{'paragraphs': [{'context': 'C', 'qas': [{'question': 'Q', 'answers': [{'text': 'a'}]}]}]}]}",
                "data[0].paragraphs[0].qas[0] has no \"id\"");
        fails("{'data': [{'paragraphs': [{'context': 'C', 'qas': [{'id': 'q', 'question': 'Q'}]}]}]}",
                "data[0].paragraphs[0].qas[0] has no \"answers\"");
        fails("{'data': [{'paragraphs': [{'context': 'C', 'qas': [{'id': 'q', 'question': 'Q', 'answers': []}]}]}]}",
                "data[0].paragraphs[0].qas[0].answers is empty");
        fails("{'data': [{'paragraphs': [{'context': 'C', 'qas': [{'id': 'q', 'question': 'Q', 'answers': [{'answer_start': 3}]}]}]}]}",
                "data[0].paragraphs[0].qas[0].answers[0] has no \"text\"");
        fails("{'data': [{'paragraphs': [{'context': 3, 'qas': []}]}]}", "\"context\" of data[0].paragraphs[0] must be a string");
        fails("{'data': []}", "holds no questions");
        fails("[1, 2]", "must hold a JSON object");
        fails("{'data': [", "is not valid JSON");
    }

    private void fails(String json, String message) throws IOException {
        Path f = file(json);
        assertThatThrownBy(() -> SquadFile.read(f)).isInstanceOf(UserError.class)
                .hasMessageContaining(f.toString()).hasMessageContaining(message);
    }

    @Test
    void aMissingFileOrADirectoryIsSaidSo() {
        assertThatThrownBy(() -> SquadFile.read(tmp.resolve("none.json"))).isInstanceOf(UserError.class)
                .hasMessageContaining("does not exist");
        assertThatThrownBy(() -> SquadFile.read(tmp)).isInstanceOf(UserError.class).hasMessageContaining("is a directory");
    }
}
