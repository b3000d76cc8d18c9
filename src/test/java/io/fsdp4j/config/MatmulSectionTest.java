package io.fsdp4j.config;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.fsdp4j.UserError;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

/** {@code matmul.algorithm}: heuristic by default, both spellings, and a one-line error naming the key otherwise. */
class MatmulSectionTest {

    private static MatmulAlgorithm algorithm(String... sets) {
        return TrainConfig.load(null, List.of(sets)).matmul().algorithm();
    }

    @Test
    void heuristicByDefaultAndEachSpellingParsesAndRoundTrips() {
        assertThat(algorithm()).isEqualTo(MatmulAlgorithm.HEURISTIC);
        assertThat(algorithm("matmul.algorithm=timed")).isEqualTo(MatmulAlgorithm.TIMED);
        assertThat(algorithm("matmul.algorithm=HEURISTIC")).isEqualTo(MatmulAlgorithm.HEURISTIC);
        assertThat(TrainConfig.defaults().toMap().get("matmul")).isEqualTo(Map.of("algorithm", "heuristic"));
        assertThat(TrainConfig.keys()).contains("matmul.algorithm");
        TrainConfig timed = TrainConfig.load(null, List.of("matmul.algorithm=timed"));
        assertThat(timed.toMap().get("matmul")).isEqualTo(Map.of("algorithm", "timed"));
    }

    @Test
    void anUnknownChoiceOrKeyIsAOneLineErrorNamingTheKey() {
        assertThatThrownBy(() -> algorithm("matmul.algorithm=fastest")).isInstanceOf(UserError.class)
                .hasMessageContaining("matmul.algorithm").hasMessageContaining("timed")
                .hasMessageContaining("heuristic").hasMessageNotContaining("\n");
        assertThatThrownBy(() -> algorithm("matmul.tuning=timed")).isInstanceOf(UserError.class)
                .hasMessageContaining("matmul.tuning").hasMessageNotContaining("\n");
        // PyTorch's switch for timing its products' algorithms points here
        assertThatThrownBy(() -> algorithm("tunableop=true")).isInstanceOf(UserError.class)
                .hasMessageContaining("did you mean 'matmul.algorithm'?");
    }
}
