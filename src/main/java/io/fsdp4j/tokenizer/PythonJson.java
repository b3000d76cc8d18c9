package io.fsdp4j.tokenizer;

import java.math.BigDecimal;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;

/**
 * JSON as Python's {@code json.dumps(value, ensure_ascii=False, indent=..., sort_keys=...)} writes it, which is
 * what transformers' {@code tojson} filter in chat templates produces: {@code ", "} and {@code ": "} between
 * items without indent, {@code ","} and a new line with one; floats as Python's {@code repr}.
 */
final class PythonJson {
    private PythonJson() {}

    static String dumps(Object value, Integer indent, boolean sortKeys) {
        StringBuilder out = new StringBuilder();
        write(out, value, indent, sortKeys, 0);
        return out.toString();
    }

    private static void write(StringBuilder out, Object value, Integer indent, boolean sortKeys, int depth) {
        switch (value) {
            case null -> out.append("null");
            case Boolean b -> out.append(b ? "true" : "false");
            case Double d -> out.append(pythonFloat(d));
            case Float f -> out.append(pythonFloat(f.doubleValue()));
            case Number n -> out.append(n);
            case Map<?, ?> map -> {
                List<Map.Entry<?, ?>> entries = new ArrayList<>(map.entrySet());
                if (sortKeys) {
                    entries.sort((a, b) -> String.valueOf(a.getKey()).compareTo(String.valueOf(b.getKey())));
                }
                writeContainer(out, '{', '}', entries, indent, depth, entry -> {
                    string(out, String.valueOf(entry.getKey()));
                    out.append(": ");
                    write(out, entry.getValue(), indent, sortKeys, depth + 1);
                });
            }
            case Iterable<?> items -> {
                List<Object> list = new ArrayList<>();
                items.forEach(list::add);
                writeContainer(out, '[', ']', list, indent, depth, item -> write(out, item, indent, sortKeys, depth + 1));
            }
            case Object[] array -> write(out, List.of(array), indent, sortKeys, depth);
            default -> string(out, value.toString());
        }
    }

    private interface ItemWriter<T> {
        void write(T item);
    }

    private static <T> void writeContainer(StringBuilder out, char open, char close, List<T> items, Integer indent,
            int depth, ItemWriter<T> writer) {
        out.append(open);
        if (items.isEmpty()) {
            out.append(close);
            return;
        }
        for (int i = 0; i < items.size(); i++) {
            if (i > 0) {
                out.append(indent == null ? ", " : ",");
            }
            if (indent != null) {
                out.append('\n').append(" ".repeat(indent * (depth + 1)));
            }
            writer.write(items.get(i));
        }
        if (indent != null) {
            out.append('\n').append(" ".repeat(indent * depth));
        }
        out.append(close);
    }

    /** A JSON string with only what JSON requires escaped ({@code ensure_ascii=False}). */
    private static void string(StringBuilder out, String s) {
        out.append('"');
        for (int i = 0; i < s.length(); i++) {
            char c = s.charAt(i);
            switch (c) {
                case '"' -> out.append("\\\"");
                case '\\' -> out.append("\\\\");
                case '\n' -> out.append("\\n");
                case '\r' -> out.append("\\r");
                case '\t' -> out.append("\\t");
                case '\b' -> out.append("\\b");
                case '\f' -> out.append("\\f");
                default -> {
                    if (c < 0x20) {
                        out.append(String.format("\\u%04x", (int) c));
                    } else {
                        out.append(c);
                    }
                }
            }
        }
        out.append('"');
    }

    /** Python's {@code repr(float)}: the shortest round-trip digits, positional for 1e-4 <= |x| < 1e16. */
    static String pythonFloat(double d) {
        if (Double.isNaN(d)) {
            return "NaN";
        }
        if (Double.isInfinite(d)) {
            return d > 0 ? "Infinity" : "-Infinity";
        }
        if (d == 0) {
            return (1 / d < 0) ? "-0.0" : "0.0";
        }
        BigDecimal exact = new BigDecimal(Double.toString(d)).stripTrailingZeros(); // shortest digits
        int exponent = exact.precision() - exact.scale() - 1; // of the leading digit
        if (exponent >= -4 && exponent < 16) {
            String plain = exact.toPlainString();
            return plain.contains(".") ? plain : plain + ".0";
        }
        String digits = exact.unscaledValue().abs().toString();
        String mantissa = digits.length() == 1 ? digits : digits.charAt(0) + "." + digits.substring(1);
        String sign = d < 0 ? "-" : "";
        return sign + mantissa + "e" + (exponent < 0 ? "-" : "+") + String.format("%02d", Math.abs(exponent));
    }
}
