package io.fsdp4j.eval;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import io.fsdp4j.config.TrainConfig;
import io.fsdp4j.data.Sequence;
import io.fsdp4j.data.SquadPrompt;
import io.fsdp4j.fsdp.RandomInit;
import io.fsdp4j.model.Architecture;
import io.fsdp4j.model.LlamaModel;
import io.fsdp4j.model.ModelConfig;
import io.fsdp4j.model.TokenBatch;
import io.fsdp4j.train.TrainingJob;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;

/**
 * A tiny model that has learnt three SQuAD answers by heart: {@link CharTokenizer}'s vocabulary, random initial
 * weights, 40 steps of AdamW on the three questions asked with {@link SquadPrompt} (loss on the answer only), as
 * data preparation would make them. Two answers end with EOS, the third with a newline and more text, so both
 * ways generation stops are taken. Deterministic: one CPU rank, no shuffling.
 */
final class SquadFixture {
    static final ModelConfig CONFIG =
            new ModelConfig(Architecture.LLAMA, CharTokenizer.VOCAB, 64, 128, 2, 4, 2, 16, 10000.0, 1e-5, false, false, 0, 128);

    /** context, question, the answer learnt, and what follows it in training. */
    static final String[][] LEARNT = {
        {"Paris is the capital of France.", "What is the capital of France?", "Paris", "</s>"},
        {"The cat sat on the red mat.", "What color is the mat?", "red", "</s>"},
        {"Alice was born in 1990 in Oslo.", "Where was Alice born?", "Oslo", "\nQ"},
    };

    private SquadFixture() {}

    /** The three questions, each with its learnt answer as the ground truth (ids q0, q1, q2). */
    static List<SquadQuestion> questions() {
        List<SquadQuestion> questions = new ArrayList<>();
        for (int i = 0; i < LEARNT.length; i++) {
            questions.add(new SquadQuestion("q" + i, LEARNT[i][0], LEARNT[i][1], List.of(LEARNT[i][2])));
        }
        return questions;
    }

    static List<Sequence> trainingData() {
        List<Sequence> data = new ArrayList<>();
        for (String[] q : LEARNT) {
            int[] prompt = CharTokenizer.ids(SquadPrompt.prompt(q[0], q[1]));
            int[] answer = CharTokenizer.ids(SquadPrompt.completion(q[2]));
            int[] end = q[3].equals("</s>") ? new int[] {CharTokenizer.EOS} : CharTokenizer.ids(q[3]);
            int[] ids = new int[prompt.length + answer.length + end.length];
            System.arraycopy(prompt, 0, ids, 0, prompt.length);
            System.arraycopy(answer, 0, ids, prompt.length, answer.length);
            System.arraycopy(end, 0, ids, prompt.length + answer.length, end.length);
            int[] labels = ids.clone();
            java.util.Arrays.fill(labels, 0, prompt.length, TokenBatch.IGNORE);
            data.add(new Sequence(ids, labels));
        }
        return data;
    }

    /**
     * Trains the model; saves its checkpoint under {@code checkpointDir} (recording {@code modelPath} as the
     * original model directory) and returns the final parameters.
     */
    static TrainingJob.Result train(Path checkpointDir, Path modelPath) {
        TrainConfig config = TrainConfig.load(null, List.of("dist.ranks=1", "dist.device=cpu", "train.batch_size=3",
                "data.seq_len=96", "train.steps=40", "optim.lr=0.01", "schedule.warmup_steps=5", "optim.weight_decay=0"));
        var run = new TrainingJob(config, CONFIG, new RandomInit(1, 0.02, LlamaModel.layout(CONFIG)), trainingData(), false)
                .savingCheckpoints(new TrainingJob.CheckpointPlan(checkpointDir, 0, 1,
                        modelPath == null ? null : modelPath.toAbsolutePath().toString(), null));
        return run.run(null, true);
    }

    /** {@code questions} as a SQuAD v1.1 JSON text, one paragraph per question. */
    static String squadJson(List<SquadQuestion> questions) {
        var json = new ObjectMapper();
        ObjectNode root = json.createObjectNode().put("version", "1.1");
        ArrayNode paragraphs = root.putArray("data").addObject().put("title", "fixture").putArray("paragraphs");
        for (SquadQuestion q : questions) {
            ObjectNode qa = paragraphs.addObject().put("context", q.context()).putArray("qas").addObject();
            qa.put("id", q.id()).put("question", q.question());
            ArrayNode answers = qa.putArray("answers");
            for (String a : q.answers()) {
                answers.addObject().put("answer_start", Math.max(0, q.context().indexOf(a))).put("text", a);
            }
        }
        try {
            return json.writeValueAsString(root);
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }
}
