package io.fsdp4j.eval;

import static org.assertj.core.api.Assertions.assertThat;

import java.util.List;
import org.assertj.core.data.Offset;
import org.junit.jupiter.api.Test;

class SquadMetricsTest {
    @Test
    void normalisationFollowsTheOfficialScript() {
        assertThat(SquadMetrics.normalize("The  Eiffel Tower!")).isEqualTo("eiffel tower");
        assertThat(SquadMetrics.normalize("an apple, a pear & the plum")).isEqualTo("apple pear plum");
        assertThat(SquadMetrics.normalize("Theatre")).isEqualTo("theatre"); // articles only as whole words
        assertThat(SquadMetrics.normalize("  \tNew\nYork  ")).isEqualTo("new york");
        assertThat(SquadMetrics.normalize("¿Qué?")).isEqualTo("¿qué"); // only ASCII punctuation is removed
    }

    @Test
    void exactMatchAndF1TakeTheBestGroundTruth() {
        List<String> truths = List.of("Denver Broncos", "The Broncos");
        assertThat(SquadMetrics.exactMatch("the broncos.", truths)).isEqualTo(1.0);
        assertThat(SquadMetrics.exactMatch("Broncos of Denver", truths)).isEqualTo(0.0);
        // "broncos of denver" vs "denver broncos": 2 shared tokens, precision 2/3, recall 1
        assertThat(SquadMetrics.f1("Broncos of Denver", truths)).isCloseTo(0.8, Offset.offset(1e-12));
        assertThat(SquadMetrics.f1("Carolina Panthers", truths)).isZero();
        // repeated tokens count only as often as they appear in the answer
        assertThat(SquadMetrics.f1("broncos broncos", List.of("broncos"))).isCloseTo(2.0 / 3, Offset.offset(1e-12));
        assertThat(SquadMetrics.f1("", List.of("x"))).isZero();
    }
}
