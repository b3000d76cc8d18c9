package io.fsdp4j.eval;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.fsdp4j.UserError;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;

/**
 * Reads a SQuAD v1.1 JSON file: {@code {"data":[{"paragraphs":[{"context":..., "qas":[{"id":..., "question":...,
 * "answers":[{"text":...}, ...]}]}]}]}}, questions in file order. A missing or mistyped field is a
 * {@link UserError} that names it and where it is ({@code data[0].paragraphs[3].qas[1]}).
 */
public final class SquadFile {
    private static final ObjectMapper JSON = new ObjectMapper();

    private SquadFile() {}

    public static List<SquadQuestion> read(Path file) {
        if (Files.isDirectory(file)) {
            throw new UserError("SQuAD file " + file + " is a directory; give the JSON file");
        }
        JsonNode root;
        try (var in = Files.newBufferedReader(file)) {
            root = JSON.readTree(in);
        } catch (NoSuchFileException e) {
            throw new UserError("SQuAD file " + file + " does not exist");
        } catch (IOException e) {
            throw new UserError("SQuAD file " + file + " is not valid JSON: "
                    + e.getMessage().lines().findFirst().orElse(""));
        }
        if (root == null || !root.isObject()) {
            throw new UserError("SQuAD file " + file + " must hold a JSON object {\"version\": ..., \"data\": [...]}");
        }
        List<SquadQuestion> questions = new ArrayList<>();
        JsonNode data = array(file, root, "data", "the file");
        for (int a = 0; a < data.size(); a++) {
            String article = "data[" + a + "]";
            JsonNode paragraphs = array(file, object(file, data.get(a), article), "paragraphs", article);
            for (int p = 0; p < paragraphs.size(); p++) {
                String paragraph = article + ".paragraphs[" + p + "]";
                JsonNode par = object(file, paragraphs.get(p), paragraph);
                String context = text(file, par, "context", paragraph);
                JsonNode qas = array(file, par, "qas", paragraph);
                for (int q = 0; q < qas.size(); q++) {
                    String where = paragraph + ".qas[" + q + "]";
                    JsonNode qa = object(file, qas.get(q), where);
                    JsonNode id = qa.get("id");
                    if (id == null || !(id.isTextual() || id.isIntegralNumber())) {
                        throw new UserError("SQuAD file " + file + ": " + where + (id == null ? " has no \"id\""
                                : ": \"id\" must be a string, got " + id));
                    }
                    String question = text(file, qa, "question", where);
                    JsonNode answers = array(file, qa, "answers", where);
                    if (answers.isEmpty()) {
                        throw new UserError("SQuAD file " + file + ": " + where + ".answers is empty (SQuAD v1.1 "
                                + "gives every question at least one answer; v2.0's unanswerable questions are not "
                                + "supported)");
                    }
                    List<String> texts = new ArrayList<>();
                    for (int i = 0; i < answers.size(); i++) {
                        String answer = where + ".answers[" + i + "]";
                        texts.add(text(file, object(file, answers.get(i), answer), "text", answer));
                    }
                    questions.add(new SquadQuestion(id.asText(), context, question, texts));
                }
            }
        }
        if (questions.isEmpty()) {
            throw new UserError("SQuAD file " + file + " holds no questions");
        }
        return questions;
    }

    private static JsonNode object(Path file, JsonNode node, String where) {
        if (!node.isObject()) {
            throw new UserError("SQuAD file " + file + ": " + where + " must be an object, got " + node);
        }
        return node;
    }

    private static JsonNode array(Path file, JsonNode parent, String field, String where) {
        JsonNode node = parent.get(field);
        if (node == null) {
            throw new UserError("SQuAD file " + file + ": " + where + " has no \"" + field + "\"");
        }
        if (!node.isArray()) {
            throw new UserError("SQuAD file " + file + ": \"" + field + "\" of " + where + " must be an array");
        }
        return node;
    }

    private static String text(Path file, JsonNode parent, String field, String where) {
        JsonNode node = parent.get(field);
        if (node == null) {
            throw new UserError("SQuAD file " + file + ": " + where + " has no \"" + field + "\"");
        }
        if (!node.isTextual()) {
            throw new UserError("SQuAD file " + file + ": \"" + field + "\" of " + where + " must be a string, got "
                    + node);
        }
        return node.asText();
    }
}
