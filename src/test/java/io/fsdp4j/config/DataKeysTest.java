package io.fsdp4j.config;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.fsdp4j.UserError;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** The data keys of issue #22: data.format, data.chat_template, data.train_on, data.too_long. */
class DataKeysTest {
    @TempDir
    Path tmp;

    @Test
    void defaultsAndOverrides() throws IOException {
        DataSection d = TrainConfig.defaults().data();
        assertThat(d.format()).isEqualTo(DataFormat.AUTO);
        assertThat(d.chatTemplate()).isNull();
        assertThat(d.trainOn()).isEqualTo(TrainOn.ASSISTANT);
        assertThat(d.tooLong()).isEqualTo(TooLong.TRUNCATE);
        TrainConfig c = TrainConfig.load(null, List.of("data.format=prompt_completion", "data.chat_template=t.jinja",
                "data.train_on=all", "data.too_long=drop"));
        assertThat(c.data().format()).isEqualTo(DataFormat.PROMPT_COMPLETION);
        assertThat(c.data().chatTemplate()).isEqualTo(Path.of("t.jsonl").resolveSibling("t.jinja"));
        assertThat(c.data().trainOn()).isEqualTo(TrainOn.ALL);
        assertThat(c.data().tooLong()).isEqualTo(TooLong.DROP);
        Path yaml = Files.writeString(tmp.resolve("c.yaml"), c.toYaml());
        assertThat(TrainConfig.load(yaml, List.of()).data()).isEqualTo(c.data());
        assertThat(TrainConfig.keys()).contains("data.format", "data.chat_template", "data.train_on", "data.too_long");
    }

    @Test
    void theChatExampleIsAValidConfig() {
        TrainConfig c = TrainConfig.load(Path.of("examples/chat/qwen2.5-0.5b-chat.yaml"), List.of());
        assertThat(c.data().train()).isEqualTo(Path.of("examples/chat/conversations.jsonl"));
        assertThat(c.data().trainOn()).isEqualTo(TrainOn.ASSISTANT);
        assertThat(c.data().pack()).isTrue();
        assertThat(Files.isRegularFile(c.data().train())).isTrue();
    }

    @Test
    void aBadValueNamesTheKey() {
        assertThatThrownBy(() -> TrainConfig.load(null, List.of("data.format=csv"))).isInstanceOf(UserError.class)
                .hasMessageContaining("data.format").hasMessageContaining("sharegpt");
        assertThatThrownBy(() -> TrainConfig.load(null, List.of("data.train_on=user"))).isInstanceOf(UserError.class)
                .hasMessageContaining("data.train_on").hasMessageContaining("assistant");
    }
}
