package io.fsdp4j.train;

import com.fasterxml.jackson.databind.JsonNode;
import io.fsdp4j.UserError;
import io.fsdp4j.checkpoint.CheckpointIndex;
import java.io.PrintStream;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;

/**
 * What a resumed run changes from the run that saved its checkpoint: every setting that differs is stated; those that
 * would make the resumed run other than a continuation (other sequences, another data order: the data's content,
 * data.seq_len, data.pack, the batch, the seed, the number of ranks) are refused unless
 * {@code checkpoint.allow_changes} is set. Settings of where things go (checkpoint.*, log.*) and of a node's place
 * are not compared.
 */
final class ResumeChanges {
    /** The key of the effective config's JSON (in a checkpoint's index) holding the data's fingerprints. */
    static final String FINGERPRINTS = "fingerprints";
    static final String WORLD_SIZE = "world size";
    private static final Set<String> INEXACT = Set.of("data.seq_len", "data.pack", "train.batch_size",
            "train.grad_accum", "train.seed", FINGERPRINTS + ".data.train", WORLD_SIZE);
    private static final List<String> NOT_COMPARED = List.of("checkpoint.", "log.", "run.", "dist.node_rank", "dist.rdzv",
            "dist.preflight", "dist.exclude_unhealthy");

    private ResumeChanges() {}

    /** One setting that differs: its value in the checkpoint's run ({@code was}) and in this one. */
    record Change(String key, String was, String now) {
        @Override
        public String toString() {
            String name = key.equals(FINGERPRINTS + ".data.train") ? "the content of data.train" : key;
            return name + " " + now + " (was " + was + ")";
        }
    }

    /**
     * Compares this run's effective config ({@code now}, with its fingerprints) and world size with those the
     * checkpoint recorded; states the differences on {@code out}, and refuses the inexact ones unless allowed.
     */
    static void check(CheckpointIndex index, String checkpoint, JsonNode now, int worldSize, boolean allowChanges,
                      PrintStream out) {
        if (index.config() == null) {
            return; // saved by a version that did not record it
        }
        Map<String, String> was = flatten(index.config()), mine = flatten(now);
        was.put(WORLD_SIZE, Integer.toString(index.worldSize()));
        mine.put(WORLD_SIZE, Integer.toString(worldSize));
        List<Change> changes = new ArrayList<>();
        for (String key : mine.keySet()) {
            if (NOT_COMPARED.stream().noneMatch(key::startsWith) && was.containsKey(key)
                    && !was.get(key).equals(mine.get(key))) {
                changes.add(new Change(key, shorten(was.get(key)), shorten(mine.get(key))));
            }
        }
        if (changes.isEmpty()) {
            return;
        }
        List<Change> inexact = changes.stream().filter(c -> INEXACT.contains(c.key())).toList();
        if (!inexact.isEmpty() && !allowChanges) {
            throw new UserError("resuming " + checkpoint + " with " + join(inexact) + " would not continue it exactly"
                    + " (other sequences or another order of them); give the run the checkpoint's settings, or set "
                    + "checkpoint.allow_changes=true to resume with these");
        }
        out.println("fsdp4j: resuming with settings other than the checkpoint's: " + join(changes)
                + (inexact.isEmpty() ? "" : " (checkpoint.allow_changes: the run does not continue it exactly)"));
    }

    private static String join(List<Change> changes) {
        return String.join(", ", changes.stream().map(Change::toString).toList());
    }

    private static String shorten(String value) {
        return value.matches("\\d+ bytes.*, (fingerprint|sha256) [0-9a-f]{64}")
                ? value.substring(0, value.length() - 56) + ".." : value;
    }

    /** "section.key" to its value as text, for every leaf of a config's JSON. */
    static Map<String, String> flatten(JsonNode config) {
        Map<String, String> flat = new LinkedHashMap<>();
        config.fields().forEachRemaining(section -> {
            if (section.getValue().isObject()) {
                section.getValue().fields().forEachRemaining(e -> flat.put(section.getKey() + "." + e.getKey(),
                        e.getValue().isValueNode() ? e.getValue().asText() : e.getValue().toString()));
            }
        });
        return flat;
    }
}
