package io.fsdp4j.preflight;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;

/**
 * The nodes' facts side by side. For each fact, the value most nodes hold is the reference (on a tie, node 0's
 * side); the nodes holding another value (or none) differ. Every node computes this from the same published facts,
 * so every node reaches the same verdict and message.
 *
 * @param names the nodes' names for messages, by index ("node 1")
 * @param differences the facts on which some node differs, in the order of node 0's facts
 * @param unhealthy   the nodes whose GPUs failed the health test, each with what failed
 * @param slow        the measures on which a node is far below the others
 */
public record Comparison(List<String> names, List<Difference> differences, List<Unhealthy> unhealthy, List<Slow> slow) {
    /** Written where a node has no such fact. */
    static final String ABSENT = "absent";
    /** A node whose measure is below this share of the nodes' median is far below its peers. */
    public static final double SLOW = 0.5;

    /** A node far below the others on one measure. */
    public record Slow(int node, Measure measure, double median) {}

    /** A node whose GPUs failed the health test, and what failed. */
    public record Unhealthy(int node, String problem) {}

    /**
     * One fact on which some nodes differ.
     *
     * @param fact      the reference node's fact (name, hint, whether it stops the job)
     * @param reference the first node holding the reference value
     * @param differing the nodes holding another value, ascending
     * @param values    every node's value (null: absent)
     */
    public record Difference(Fact fact, int reference, List<Integer> differing, List<String> values) {
        String valueOf(int node) {
            return Objects.requireNonNullElse(values.get(node), ABSENT);
        }
    }

    public static Comparison of(List<String> names, List<NodeFacts> nodes) {
        if (names.size() != nodes.size()) {
            throw new IllegalArgumentException(names.size() + " names for " + nodes.size() + " nodes");
        }
        Map<String, Fact> first = new LinkedHashMap<>(); // every key, in node 0's order, then others' extra keys
        List<Map<String, Fact>> byKey = new ArrayList<>();
        for (NodeFacts node : nodes) {
            Map<String, Fact> mine = new LinkedHashMap<>();
            node.facts().forEach(f -> mine.put(f.key(), f));
            mine.forEach(first::putIfAbsent);
            byKey.add(mine);
        }
        List<Difference> differences = new ArrayList<>();
        for (String key : first.keySet()) {
            List<String> values = new ArrayList<>();
            Map<String, List<Integer>> holders = new LinkedHashMap<>(); // in order of first holder
            for (int n = 0; n < nodes.size(); n++) {
                Fact f = byKey.get(n).get(key);
                values.add(f == null ? null : f.value());
                holders.computeIfAbsent(f == null ? null : f.value(), v -> new ArrayList<>()).add(n);
            }
            if (holders.size() == 1) {
                continue;
            }
            List<Integer> majority = null;
            for (List<Integer> group : holders.values()) {
                if (majority == null || group.size() > majority.size()) { // strictly more: ties go to the earlier node
                    majority = group;
                }
            }
            int reference = majority.getFirst();
            List<Integer> differing = new ArrayList<>();
            for (int n = 0; n < nodes.size(); n++) {
                if (!majority.contains(n)) {
                    differing.add(n);
                }
            }
            Fact fact = byKey.get(reference).get(key);
            differences.add(new Difference(fact != null ? fact : first.get(key), reference, differing, values));
        }
        List<Unhealthy> unhealthy = new ArrayList<>();
        for (int n = 0; n < nodes.size(); n++) {
            if (nodes.get(n).healthProblem() != null) {
                unhealthy.add(new Unhealthy(n, nodes.get(n).healthProblem()));
            }
        }
        return new Comparison(List.copyOf(names), List.copyOf(differences), List.copyOf(unhealthy), slow(nodes));
    }

    /** For each measure, the nodes below {@link #SLOW} of the median of the nodes that took it. */
    private static List<Slow> slow(List<NodeFacts> nodes) {
        Map<String, List<Double>> values = new LinkedHashMap<>();
        nodes.forEach(n -> n.measures().forEach(m -> values.computeIfAbsent(m.key(), k -> new ArrayList<>()).add(m.value())));
        List<Slow> slow = new ArrayList<>();
        values.forEach((key, all) -> {
            List<Double> sorted = all.stream().sorted().toList();
            int k = sorted.size();
            double median = k % 2 == 1 ? sorted.get(k / 2) : (sorted.get(k / 2 - 1) + sorted.get(k / 2)) / 2;
            for (int n = 0; n < nodes.size(); n++) {
                for (Measure m : nodes.get(n).measures()) {
                    if (m.key().equals(key) && m.value() < SLOW * median) {
                        slow.add(new Slow(n, m, median));
                    }
                }
            }
        });
        return List.copyOf(slow);
    }

    /** Whether no difference stops the job. */
    public boolean agree() {
        return unhealthy.isEmpty() && slow.isEmpty() && differences.stream().noneMatch(d -> d.fact().required());
    }

    /**
     * The nodes whose health stops the job (GPUs that failed the test, or a rate far below the others'), ascending,
     * each with its first problem as {@link #message()} says it ("the GPU health test failed on node 2: ...").
     */
    public Map<Integer, String> healthProblems() {
        Map<Integer, String> problems = new java.util.TreeMap<>();
        unhealthy.forEach(u -> problems.putIfAbsent(u.node(), failed(u)));
        slow.forEach(s -> problems.putIfAbsent(s.node(), lagging(s)));
        return problems;
    }

    /** Whether every problem that stops the job is a node's health (no fact on which a node differs). */
    public boolean onlyHealthProblems() {
        return differences.stream().noneMatch(d -> d.fact().required());
    }

    private String failed(Unhealthy u) {
        return "the GPU health test failed on " + names.get(u.node()) + ": " + u.problem();
    }

    private String lagging(Slow s) {
        return String.format(java.util.Locale.ROOT, "the %s on %s is %.2f %s, %.0f%% of the nodes' median %.2f %s",
                s.measure().what(), names.get(s.node()), s.measure().value(), s.measure().unit(),
                100 * s.measure().value() / s.median(), s.median(), s.measure().unit());
    }

    /**
     * The one-line verdict on the first problem that stops the job: a node whose GPUs failed the health test, a fact
     * on which a node differs (e.g. {@code model weights (model.safetensors) differ on node 1 (fingerprint
     * ab12cd34.. vs cd34ab12.. on node 0): check model.path on that node}), or a node far below the others' rates;
     * then the names of the other problems. Empty when the nodes agree.
     */
    public String message() {
        List<String> problems = new ArrayList<>(), names = new ArrayList<>();
        for (Unhealthy u : unhealthy) {
            problems.add(failed(u) + ": run fsdp4j doctor on that node");
            names.add("GPU health (" + this.names.get(u.node()) + ")");
        }
        for (Difference d : differences) {
            if (!d.fact().required()) {
                continue;
            }
            int shown = d.differing().getFirst();
            problems.add(d.fact().what() + (d.fact().plural() ? " differ on " : " differs on ") + nodes(d.differing())
                    + " (" + versus(d.valueOf(shown), d.valueOf(d.reference())) + " on " + this.names.get(d.reference())
                    + "): " + d.fact().hint().replace(Fact.THOSE_NODES,
                            d.differing().size() == 1 ? "that node" : "those nodes"));
            names.add(d.fact().what() + " (" + nodes(d.differing()) + ")");
        }
        for (Slow s : slow) {
            problems.add(lagging(s) + ": a degraded GPU? run fsdp4j doctor on that node");
            names.add(s.measure().what() + " (" + this.names.get(s.node()) + ")");
        }
        if (problems.isEmpty()) {
            return "";
        }
        var line = new StringBuilder(problems.getFirst());
        if (problems.size() > 1) {
            List<String> others = names.subList(1, names.size());
            line.append("; also different: ").append(String.join(", ", others.subList(0, Math.min(3, others.size()))));
            if (others.size() > 3) {
                line.append(" and ").append(others.size() - 3).append(" more");
            }
        }
        return line.toString();
    }

    /** The differences that do not stop the job, one line each. */
    public List<String> notes() {
        return differences.stream().filter(d -> !d.fact().required())
                .map(d -> d.fact().what() + " differ" + (d.fact().plural() ? "" : "s") + " on " + nodes(d.differing())
                        + " (" + versus(d.valueOf(d.differing().getFirst()), d.valueOf(d.reference())) + " on "
                        + names.get(d.reference()) + ")")
                .toList();
    }

    /** "fingerprint ab12cd34.. vs cd34ab12..": the words both values start with are said once. */
    static String versus(String value, String reference) {
        int common = 0;
        for (int i = 0; i < Math.min(value.length(), reference.length()) && value.charAt(i) == reference.charAt(i); i++) {
            if (value.charAt(i) == ' ') {
                common = i + 1;
            }
        }
        return Fact.shown(value) + " vs " + Fact.shown(reference.substring(common));
    }

    private String nodes(List<Integer> indices) {
        if (indices.size() == 1) {
            return names.get(indices.getFirst());
        }
        List<String> shown = indices.stream().limit(4).map(names::get).toList();
        return String.join(", ", shown) + (indices.size() > 4 ? " and " + (indices.size() - 4) + " more" : "");
    }
}
