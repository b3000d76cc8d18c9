package io.fsdp4j.data;

import static org.assertj.core.api.Assertions.assertThat;

import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;

/**
 * {@link Dataset#documentTokens}: the length of packed documents as attention sees them (what the plan times
 * attention at when a run chooses its checkpointing).
 */
class DocumentTokensTest {
    private static Sequence packed(int... documentLengths) {
        int n = 0;
        for (int d : documentLengths) {
            n += d;
        }
        int[] ids = new int[n], starts = new int[n];
        int p = 0;
        for (int d : documentLengths) {
            for (int i = 0; i < d; i++) {
                starts[p + i] = p;
            }
            p += d;
        }
        return new Sequence(ids, ids.clone(), starts);
    }

    private static Dataset of(List<Sequence> sequences) {
        return new Dataset("test", sequences, List.of(), sequences.size(), 0, 0);
    }

    @Test
    void documentsOfOneLengthAreThatLength() {
        assertThat(of(List.of(packed(4, 4), packed(4, 4))).documentTokens()).isEqualTo(4);
        assertThat(of(List.of(packed(1024, 1024, 1024, 1024))).documentTokens()).isEqualTo(1024);
    }

    @Test
    void mixedLengthsCountAsTheirAttentionDoes() {
        // documents of 6 and 2: keys a query (21 + 3) / 8 = 3, so d = 5 (a uniform 5 attends 3 keys a query)
        assertThat(of(List.of(packed(6, 2))).documentTokens()).isEqualTo(5);
    }

    @Test
    void oneDocumentASequenceIsNone() {
        assertThat(of(List.of(new Sequence(new int[8], new int[8]))).documentTokens()).isZero();
        assertThat(of(List.of(packed(8))).documentTokens()).isZero(); // packed, but one document fills it
        assertThat(of(List.of()).documentTokens()).isZero();
    }

    @Test
    void aLargeSplitIsSampledEvenly() {
        List<Sequence> many = new ArrayList<>();
        for (int i = 0; i < 10 * Dataset.DOCUMENT_SAMPLE; i++) {
            many.add(i % 2 == 0 ? packed(16, 16) : packed(8, 8, 8, 8));
        }
        // every tenth sequence, all of them even: documents of 16
        assertThat(of(many).documentTokens()).isEqualTo(16);
    }
}
