package io.fsdp4j.eval;

import java.util.HashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.regex.Pattern;

/**
 * SQuAD v1.1 exact match and F1, with the official answer normalisation: lower case, ASCII punctuation removed,
 * the articles a/an/the removed, whitespace collapsed. A prediction is scored against each ground-truth answer
 * and the best score is kept.
 */
public final class SquadMetrics {
    private static final Pattern ARTICLES = Pattern.compile("\\b(a|an|the)\\b");
    private static final String PUNCTUATION = "!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~";

    private SquadMetrics() {}

    public static String normalize(String answer) {
        String lower = answer.toLowerCase(Locale.ROOT);
        StringBuilder kept = new StringBuilder(lower.length());
        lower.codePoints().filter(c -> PUNCTUATION.indexOf(c) < 0).forEach(kept::appendCodePoint);
        String noArticles = ARTICLES.matcher(kept).replaceAll(" ");
        return String.join(" ", noArticles.trim().split("\\s+")).trim();
    }

    public static double exactMatch(String prediction, List<String> groundTruths) {
        String p = normalize(prediction);
        return groundTruths.stream().anyMatch(g -> normalize(g).equals(p)) ? 1.0 : 0.0;
    }

    public static double f1(String prediction, List<String> groundTruths) {
        double best = 0;
        for (String g : groundTruths) {
            best = Math.max(best, f1(prediction, g));
        }
        return best;
    }

    static double f1(String prediction, String groundTruth) {
        String[] p = tokens(prediction), g = tokens(groundTruth);
        Map<String, Integer> counts = new HashMap<>();
        for (String t : g) {
            counts.merge(t, 1, Integer::sum);
        }
        int same = 0;
        for (String t : p) {
            Integer c = counts.get(t);
            if (c != null && c > 0) {
                same++;
                counts.put(t, c - 1);
            }
        }
        if (same == 0) {
            return 0;
        }
        double precision = (double) same / p.length, recall = (double) same / g.length;
        return 2 * precision * recall / (precision + recall);
    }

    private static String[] tokens(String text) {
        String n = normalize(text);
        return n.isEmpty() ? new String[0] : n.split(" ");
    }
}
