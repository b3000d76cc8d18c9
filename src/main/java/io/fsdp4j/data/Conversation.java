package io.fsdp4j.data;

import com.fasterxml.jackson.databind.JsonNode;
import io.fsdp4j.UserError;
import io.fsdp4j.tokenizer.ChatTemplate;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;

/**
 * One conversation of a dataset record, checked and in the form a chat template renders: {@code messages} as
 * {@code {role, content, ...}} maps (ShareGPT's {@code {from, value}} turned into roles), and {@code extra}, the
 * template's other variables ({@code tools}).
 */
record Conversation(List<Map<String, Object>> messages, Map<String, Object> extra) {
    /** ShareGPT's speakers, and the roles they become. */
    private static final Map<String, String> SHAREGPT_ROLES = Map.ofEntries(
            Map.entry("system", "system"), Map.entry("human", "user"), Map.entry("user", "user"),
            Map.entry("gpt", "assistant"), Map.entry("assistant", "assistant"), Map.entry("chatgpt", "assistant"),
            Map.entry("bing", "assistant"), Map.entry("bard", "assistant"), Map.entry("model", "assistant"),
            Map.entry("tool", "tool"), Map.entry("function_response", "tool"), Map.entry("observation", "tool"));
    private static final Set<String> ROLES = Set.of("system", "developer", "user", "assistant", "tool");

    /**
     * The conversation of a record: {@code messages} ({@code {role, content}}) or, with {@code shareGpt},
     * {@code conversations} ({@code {from, value}}), and its {@code tools}; {@code where} names the record in errors.
     */
    static Conversation of(JsonNode node, String where, boolean shareGpt) {
        String key = shareGpt ? "conversations" : "messages";
        if (node == null || !node.isObject()) {
            throw new UserError(where + ": expected an object with \"" + key + "\"");
        }
        JsonNode list = node.get(key);
        if (list == null || !list.isArray()) {
            throw new UserError(where + ": missing \"" + key + "\", a list of " + (shareGpt
                    ? "{\"from\", \"value\"}" : "{\"role\", \"content\"}") + " messages");
        }
        if (list.isEmpty()) {
            throw new UserError(where + ": the conversation is empty; give at least one message, or remove the line");
        }
        List<Map<String, Object>> messages = new ArrayList<>(list.size());
        for (int i = 0; i < list.size(); i++) {
            messages.add(shareGpt ? shareGptMessage(list.get(i), where, i + 1) : message(list.get(i), where, i + 1));
        }
        Map<String, Object> extra = new HashMap<>();
        JsonNode tools = node.get("tools");
        if (tools != null && !tools.isNull()) {
            if (!tools.isArray()) {
                throw new UserError(where + ": \"tools\" must be a list of tool definitions");
            }
            extra.put("tools", JsonRecords.JSON.convertValue(tools, List.class));
        }
        return new Conversation(messages, extra);
    }

    @SuppressWarnings("unchecked")
    private static Map<String, Object> message(JsonNode m, String where, int index) {
        String at = where + ": message " + index;
        if (!m.isObject()) {
            throw new UserError(at + " must be an object with \"role\" and \"content\"");
        }
        JsonNode role = m.get("role");
        if (role == null || !role.isTextual()) {
            throw new UserError(at + " has no \"role\" (system, user, assistant or tool)");
        }
        if (!ROLES.contains(role.textValue())) {
            throw new UserError(at + " has the unknown role '" + JsonRecords.oneLine(role.textValue())
                    + "'; give system, user, assistant or tool");
        }
        JsonNode content = m.get("content");
        boolean toolCalls = m.hasNonNull("tool_calls");
        if (content == null || content.isNull()) {
            if (!toolCalls) {
                throw new UserError(at + " has no \"content\"");
            }
        } else if (!content.isTextual() && !content.isArray()) {
            throw new UserError(at + ": \"content\" must be a string (or a list of parts), found "
                    + JsonRecords.oneLine(content.toString()));
        }
        Map<String, Object> map = JsonRecords.JSON.convertValue(m, Map.class);
        if (content == null || content.isNull()) {
            map.put("content", ""); // an assistant turn of tool calls only
        }
        checkText(map.get("content"), at);
        return map;
    }

    private static Map<String, Object> shareGptMessage(JsonNode m, String where, int index) {
        String at = where + ": message " + index;
        if (!m.isObject()) {
            throw new UserError(at + " must be an object with \"from\" and \"value\"");
        }
        JsonNode from = m.get("from");
        if (from == null || !from.isTextual()) {
            throw new UserError(at + " has no \"from\" (human, gpt, system or tool)");
        }
        String role = SHAREGPT_ROLES.get(from.textValue());
        if (role == null) {
            throw new UserError(at + " is from the unknown speaker '" + JsonRecords.oneLine(from.textValue())
                    + "'; give human, gpt, system or tool (or user, assistant)");
        }
        JsonNode value = m.get("value");
        if (value == null || !value.isTextual()) {
            throw new UserError(at + " has no \"value\" string");
        }
        Map<String, Object> map = new LinkedHashMap<>();
        map.put("role", role);
        map.put("content", value.textValue());
        checkText(value.textValue(), at);
        return map;
    }

    /** Text may not hold the noncharacters that the chat-template renderer uses as markers. */
    private static void checkText(Object content, String at) {
        if (content instanceof String text && (ChatTemplate.hasMarkers(text) || text.indexOf('\uFDD2') >= 0)) {
            throw new UserError(at + " holds a Unicode noncharacter (U+FDD0..U+FDD2); remove it");
        }
    }
}
