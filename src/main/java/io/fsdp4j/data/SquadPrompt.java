package io.fsdp4j.data;

/**
 * The one prompt format of SQuAD question answering, shared by evaluation ({@code fsdp4j eval --task squad}) and
 * by data preparation, so that a model fine-tuned on prepared SQuAD data is asked in the words it was trained on:
 * <pre>
 * Context: {context}
 * Question: {question}
 * Answer:
 * </pre>
 * The model continues with a space and the answer ({@link #completion}), then a newline or its end-of-sequence
 * token. Texts are used as they are; nothing is stripped or escaped.
 */
public final class SquadPrompt {
    private SquadPrompt() {}

    /** {@code "Context: {context}\nQuestion: {question}\nAnswer:"}. */
    public static String prompt(String context, String question) {
        return "Context: " + context + "\nQuestion: " + question + "\nAnswer:";
    }

    /** What a trained model should write after {@link #prompt}: a space and the answer (before its EOS token). */
    public static String completion(String answer) {
        return " " + answer;
    }
}
