package io.fsdp4j.data;

import io.fsdp4j.UserError;
import io.fsdp4j.model.TokenBatch;
import io.fsdp4j.tokenizer.ChatTemplate;
import io.fsdp4j.tokenizer.Tokenizer;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * A conversation as training sees it: rendered with the model's chat template, tokenized whole (as transformers'
 * {@code apply_chat_template(tokenize=True)}: no special tokens added, the template writes its own), and labelled.
 *
 * <p>Which tokens carry loss, by default the assistant's:
 * <ul>
 *   <li>a template with {@code {% generation %}} blocks: exactly what they enclose, as transformers'
 *       {@code return_assistant_tokens_mask};</li>
 *   <li>any other template: each assistant message's content as the template renders it (told apart by rendering
 *       the conversation again with that content replaced by a marker: the text where the two renderings part),
 *       its tool calls, through the first special token that follows (the end-of-turn marker: {@code <|im_end|>},
 *       {@code <|eot_id|>}, {@code </s>}). Role headers carry no loss.</li>
 * </ul>
 * A token carries loss when its characters overlap such a range. With {@code allTokens}, every token does.
 */
public final class ChatTokens {
    /** Stands for one assistant message's content in the second rendering; a Unicode noncharacter. */
    private static final String MARKER = "\uFDD2";

    private ChatTokens() {}

    /**
     * The ids and labels of {@code messages} (maps with {@code role} and {@code content}, as a dataset holds them).
     * A conversation the template refuses, one without an assistant message (unless {@code allTokens}), or one whose
     * assistant text cannot be found in the rendering, is a {@link UserError} without a location (the caller adds
     * the file and line).
     *
     * @param extra variables beside the special tokens, such as {@code tools}
     */
    public static Sequence tokenize(Tokenizer tokenizer, ChatTemplate template, List<Map<String, Object>> messages,
                                    Map<String, Object> extra, boolean allTokens) {
        Map<String, Object> variables = new HashMap<>(tokenizer.specialTokenVariables());
        variables.putAll(extra);
        ChatTemplate.Rendering rendering = template.renderMarked(messages, false, variables);
        String text = rendering.text();
        if (text.isEmpty()) {
            throw new UserError("the chat template renders the conversation as empty text");
        }
        Tokenizer.Encoded encoded = tokenizer.encodeWithOffsets(text);
        int[] ids = encoded.ids();
        int[] labels = ids.clone();
        if (allTokens) {
            return new Sequence(ids, labels);
        }
        List<int[]> spans = template.hasGenerationBlocks() ? rendering.generated()
                : assistantSpans(tokenizer, template, messages, variables, text);
        if (spans.isEmpty()) {
            throw new UserError(template.hasGenerationBlocks()
                    ? "the chat template's {% generation %} blocks mark nothing in this conversation (no assistant"
                            + " message?); give one, or set data.train_on=all to train on every token"
                    : "the conversation has no assistant message to train on; give one, or set data.train_on=all");
        }
        boolean[] trained = new boolean[ids.length];
        for (int[] span : spans) {
            for (int t = 0; t < ids.length; t++) {
                if (encoded.starts()[t] < span[1] && encoded.ends()[t] > span[0]) {
                    trained[t] = true;
                }
            }
        }
        for (int t = 0; t < ids.length; t++) {
            if (!trained[t]) {
                labels[t] = TokenBatch.IGNORE;
            }
        }
        return new Sequence(ids, labels);
    }

    /** The character ranges of the assistant messages' text in {@code text}, in message order. */
    private static List<int[]> assistantSpans(Tokenizer tokenizer, ChatTemplate template,
                                              List<Map<String, Object>> messages, Map<String, Object> variables,
                                              String text) {
        List<int[]> spans = new ArrayList<>();
        for (int i = 0; i < messages.size(); i++) {
            if (!"assistant".equals(messages.get(i).get("role"))) {
                continue;
            }
            List<Map<String, Object>> probe = new ArrayList<>(messages);
            Map<String, Object> marked = new LinkedHashMap<>(messages.get(i));
            marked.put("content", MARKER);
            probe.set(i, marked);
            String other = template.renderMarked(probe, false, variables).text();
            int at = other.indexOf(MARKER);
            if (at < 0) {
                throw new UserError("the chat template does not write the content of message " + (i + 1)
                        + " (an assistant message), so its tokens cannot be found; use a template with"
                        + " {% generation %} blocks, or data.train_on=all");
            }
            int prefix = 0;
            int maxPrefix = Math.min(at, text.length());
            while (prefix < maxPrefix && text.charAt(prefix) == other.charAt(prefix)) {
                prefix++;
            }
            int suffix = 0;
            int maxSuffix = Math.min(other.length() - at - MARKER.length(), text.length() - prefix);
            while (suffix < maxSuffix
                    && text.charAt(text.length() - 1 - suffix) == other.charAt(other.length() - 1 - suffix)) {
                suffix++;
            }
            int start = prefix;
            int contentEnd = text.length() - suffix;
            int end = endOfTurn(tokenizer, text, contentEnd);
            if (end < 0) {
                throw new UserError("no end-of-turn token (a special token such as " + String.join(" or ",
                        exampleMarkers(tokenizer)) + ") follows the content of message " + (i + 1) + " (an assistant"
                        + " message) in the rendering; use a template with {% generation %} blocks, or"
                        + " data.train_on=all");
            }
            spans.add(new int[] {start, end});
        }
        return spans;
    }

    /** Where the first special token at or after {@code from} ends; -1 if none follows. */
    private static int endOfTurn(Tokenizer tokenizer, String text, int from) {
        int best = -1, bestEnd = -1;
        for (String token : tokenizer.specialTokens()) {
            if (token.isEmpty()) {
                continue;
            }
            int at = text.indexOf(token, from);
            if (at >= 0 && (best < 0 || at < best || at == best && at + token.length() > bestEnd)) {
                best = at;
                bestEnd = at + token.length();
            }
        }
        return bestEnd;
    }

    private static List<String> exampleMarkers(Tokenizer tokenizer) {
        return tokenizer.eosToken().map(List::of).orElse(List.of("<|im_end|>"));
    }
}
