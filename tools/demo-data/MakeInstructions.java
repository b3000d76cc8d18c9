import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.SplittableRandom;
import java.util.function.Function;

/**
 * Writes the built-in demo's instruction dataset: twelve short string and number tasks ("Reverse: cat" -> "tac",
 * "Add one: 19" -> "20", "Sort: 391" -> "139") for a byte-level model of about a million parameters (the tiny
 * preset). Every word is a random string of letters, so the data holds no third-party text. Deterministic: the
 * same files on every run.
 *
 * <pre>java tools/demo-data/MakeInstructions.java src/main/resources/demo</pre>
 *
 * writes instructions.jsonl (3000 training examples) and instructions-eval.jsonl (300 held out: no instruction of
 * it occurs in the training file), Alpaca JSONL with an empty input. With the compact prompt
 * ("### Instruction:\n...\n### Response:\n") and EOS, every example is at most 59 bytes.
 */
public final class MakeInstructions {
    static final long SEED = 20_250_601L;
    static final int TRAIN = 3000;
    static final int EVAL = 300;

    record Example(String instruction, String output) {}

    record Task(String name, Function<SplittableRandom, Example> make) {}

    public static void main(String[] args) throws IOException {
        Path dir = Path.of(args.length > 0 ? args[0] : "src/main/resources/demo");
        List<Task> tasks = List.of(
                new Task("reverse", r -> {
                    String w = word(r, 3, 5);
                    return ex("Reverse: " + w, reverse(w));
                }),
                new Task("upper", r -> {
                    String w = word(r, 3, 6);
                    return ex("Uppercase: " + w, w.toUpperCase());
                }),
                new Task("twice", r -> {
                    String w = word(r, 2, 4);
                    return ex("Repeat twice: " + w, w + w);
                }),
                new Task("shift", r -> {
                    String w = word(r, 2, 5, 25);
                    return ex("Shift up: " + w, shift(w, 1));
                }),
                new Task("back", r -> {
                    String w = shift(word(r, 2, 5, 25), 1);
                    return ex("Shift down: " + w, shift(w, -1));
                }),
                new Task("first", r -> {
                    String w = word(r, 3, 6);
                    return ex("First letter: " + w, w.substring(0, 1));
                }),
                new Task("last", r -> {
                    String w = word(r, 3, 6);
                    return ex("Last letter: " + w, w.substring(w.length() - 1));
                }),
                new Task("length", r -> {
                    String w = word(r, 1, 9);
                    return ex("Length: " + w, Integer.toString(w.length()));
                }),
                new Task("plus1", r -> {
                    int n = r.nextInt(999);
                    return ex("Add one: " + n, Integer.toString(n + 1));
                }),
                new Task("sort", r -> {
                    char[] d = {digit(r), digit(r), digit(r)};
                    String in = new String(d);
                    java.util.Arrays.sort(d);
                    return ex("Sort: " + in, new String(d));
                }),
                new Task("swap", r -> {
                    String a = word(r, 2, 3), b = word(r, 2, 3);
                    return ex("Swap: " + a + " " + b, b + " " + a);
                }),
                new Task("max", r -> {
                    String d = "" + digit(r) + digit(r) + digit(r) + digit(r);
                    return ex("Largest digit: " + d, "" + (char) d.chars().max().getAsInt());
                }));

        SplittableRandom random = new SplittableRandom(SEED);
        // Held-out examples first, so that the training set never contains one of their instructions.
        Map<String, Example> eval = draw(tasks, random, EVAL, Map.of());
        Map<String, Example> train = draw(tasks, random, TRAIN, eval);
        Files.createDirectories(dir);
        write(dir.resolve("instructions.jsonl"), train.values());
        write(dir.resolve("instructions-eval.jsonl"), eval.values());
        System.out.println("wrote " + train.size() + " training and " + eval.size() + " held-out examples to " + dir);
    }

    /** {@code count} distinct examples, tasks in turn, none with an instruction of {@code excluded}. */
    static Map<String, Example> draw(List<Task> tasks, SplittableRandom random, int count,
                                     Map<String, Example> excluded) {
        Map<String, Example> drawn = new LinkedHashMap<>();
        for (int i = 0; drawn.size() < count; i++) {
            int t = i % tasks.size();
            Example e = tasks.get(t).make().apply(random);
            if (drawn.containsKey(e.instruction()) || excluded.containsKey(e.instruction())) {
                continue;
            }
            drawn.put(e.instruction(), e);
        }
        return drawn;
    }

    static void write(Path file, Iterable<Example> examples) throws IOException {
        StringBuilder out = new StringBuilder();
        for (Example e : examples) {
            // Letters, digits, spaces and '+' only: nothing needs escaping in JSON.
            out.append("{\"instruction\":\"").append(e.instruction())
                    .append("\",\"input\":\"\",\"output\":\"").append(e.output()).append("\"}\n");
        }
        Files.writeString(file, out, StandardCharsets.UTF_8);
    }

    static Example ex(String instruction, String output) {
        return new Example(instruction, output);
    }

    static String word(SplittableRandom r, int min, int max) {
        return word(r, min, max, 26);
    }

    /** A random word of {@code min..max} of the first {@code letters} letters of the alphabet. */
    static String word(SplittableRandom r, int min, int max, int letters) {
        int n = min + r.nextInt(max - min + 1);
        StringBuilder w = new StringBuilder(n);
        for (int i = 0; i < n; i++) {
            w.append((char) ('a' + r.nextInt(letters)));
        }
        return w.toString();
    }

    /** Each letter moved {@code by} places in the alphabet. */
    static String shift(String w, int by) {
        StringBuilder s = new StringBuilder(w.length());
        w.chars().forEach(c -> s.append((char) (c + by)));
        return s.toString();
    }

    static char digit(SplittableRandom r) {
        return (char) ('0' + r.nextInt(10));
    }

    static String reverse(String w) {
        return new StringBuilder(w).reverse().toString();
    }
}
