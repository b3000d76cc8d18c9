package io.fsdp4j.tokenizer;

import java.util.ArrayList;
import java.util.Collection;
import java.util.List;
import java.util.Locale;
import jinjava.javax.el.ELContext;

/**
 * Python's {@code str} methods for Jinjava, which otherwise calls Java's {@code String} methods: chat templates
 * write {@code content.startswith('<tool_response>')}, {@code content.split('</think>')[-1].lstrip('\n')},
 * {@code text.strip()}, {@code ', '.join(names)}. Placed before Jinjava's own resolvers; a method not listed here
 * falls through to them. Indexes count code points, as Python's do.
 */
final class PythonStrings extends MethodCallResolver {

    @Override
    public Object invoke(ELContext context, Object base, Object method, Class<?>[] paramTypes, Object[] params) {
        if (!(base instanceof String s) || method == null) {
            return null;
        }
        Object[] p = params == null ? new Object[0] : params;
        Object result = switch (method.toString()) {
            case "startswith" -> anyMatch(p, 0, prefix -> s.startsWith(prefix));
            case "endswith" -> anyMatch(p, 0, suffix -> s.endsWith(suffix));
            case "strip" -> rstrip(lstrip(s, chars(p)), chars(p));
            case "lstrip" -> lstrip(s, chars(p));
            case "rstrip" -> rstrip(s, chars(p));
            case "split" -> split(s, p);
            case "rsplit" -> rsplit(s, p);
            case "upper" -> s.toUpperCase(Locale.ROOT);
            case "lower" -> s.toLowerCase(Locale.ROOT);
            case "title" -> title(s);
            case "capitalize" -> s.isEmpty() ? s
                    : s.substring(0, s.offsetByCodePoints(0, 1)).toUpperCase(Locale.ROOT)
                            + s.substring(s.offsetByCodePoints(0, 1)).toLowerCase(Locale.ROOT);
            case "replace" -> replace(s, str(p, 0), str(p, 1), p.length > 2 ? toInt(p[2]) : -1);
            case "find" -> codePointIndex(s, s.indexOf(str(p, 0)));
            case "rfind" -> codePointIndex(s, s.lastIndexOf(str(p, 0)));
            case "count" -> count(s, str(p, 0));
            case "join" -> join(s, p.length > 0 ? p[0] : null);
            case "isdigit" -> !s.isEmpty() && s.codePoints().allMatch(Character::isDigit);
            case "isalpha" -> !s.isEmpty() && s.codePoints().allMatch(Character::isLetter);
            case "isalnum" -> !s.isEmpty() && s.codePoints().allMatch(Character::isLetterOrDigit);
            case "isspace" -> !s.isEmpty() && s.codePoints().allMatch(PythonStrings::isSpace);
            case "islower" -> s.codePoints().anyMatch(Character::isLowerCase)
                    && s.codePoints().noneMatch(Character::isUpperCase);
            case "isupper" -> s.codePoints().anyMatch(Character::isUpperCase)
                    && s.codePoints().noneMatch(Character::isLowerCase);
            default -> null;
        };
        if (result != null) {
            context.setPropertyResolved(true);
        }
        return result;
    }

    private interface StringTest {
        boolean test(String s);
    }

    /** Python accepts one string or a tuple of them. */
    private static Boolean anyMatch(Object[] p, int index, StringTest test) {
        if (p.length > index && p[index] instanceof Collection<?> options) {
            return options.stream().anyMatch(o -> test.test(String.valueOf(o)));
        }
        return test.test(str(p, index));
    }

    private static String str(Object[] p, int index) {
        if (p.length <= index || p[index] == null) {
            throw new IllegalArgumentException("missing string argument " + (index + 1));
        }
        return p[index].toString();
    }

    /** The characters to strip: null for whitespace. */
    private static String chars(Object[] p) {
        return p.length == 0 || p[0] == null ? null : p[0].toString();
    }

    private static int toInt(Object o) {
        return o instanceof Number n ? n.intValue() : Integer.parseInt(o.toString());
    }

    /** Python's {@code str.isspace} for one code point. */
    static boolean isSpace(int cp) {
        return Character.isWhitespace(cp) || Character.isSpaceChar(cp) || cp == 0x85;
    }

    private static boolean strips(int cp, String chars) {
        return chars == null ? isSpace(cp) : chars.indexOf(cp) >= 0;
    }

    static String lstrip(String s, String chars) {
        int i = 0;
        while (i < s.length() && strips(s.codePointAt(i), chars)) {
            i += Character.charCount(s.codePointAt(i));
        }
        return s.substring(i);
    }

    static String rstrip(String s, String chars) {
        int end = s.length();
        while (end > 0 && strips(s.codePointBefore(end), chars)) {
            end -= Character.charCount(s.codePointBefore(end));
        }
        return s.substring(0, end);
    }

    /** {@code split()}, {@code split(sep)}, {@code split(sep, maxsplit)}; sep None splits on runs of whitespace. */
    static List<String> split(String s, Object[] p) {
        String sep = p.length > 0 && p[0] != null ? p[0].toString() : null;
        int max = p.length > 1 ? toInt(p[1]) : -1;
        List<String> parts = new ArrayList<>();
        if (sep == null) {
            int i = 0;
            while (true) {
                while (i < s.length() && isSpace(s.codePointAt(i))) {
                    i += Character.charCount(s.codePointAt(i));
                }
                if (i >= s.length()) {
                    return parts;
                }
                if (max >= 0 && parts.size() == max) {
                    parts.add(rstrip(s.substring(i), null));
                    return parts;
                }
                int start = i;
                while (i < s.length() && !isSpace(s.codePointAt(i))) {
                    i += Character.charCount(s.codePointAt(i));
                }
                parts.add(s.substring(start, i));
            }
        }
        if (sep.isEmpty()) {
            throw new IllegalArgumentException("empty separator");
        }
        int start = 0;
        for (int at = s.indexOf(sep); at >= 0 && (max < 0 || parts.size() < max); at = s.indexOf(sep, start)) {
            parts.add(s.substring(start, at));
            start = at + sep.length();
        }
        parts.add(s.substring(start));
        return parts;
    }

    /** {@code rsplit(sep, maxsplit)} with a separator; without maxsplit it is {@code split}. */
    static List<String> rsplit(String s, Object[] p) {
        if (p.length < 2 || p[0] == null) {
            return split(s, p);
        }
        String sep = p[0].toString();
        int max = toInt(p[1]);
        List<String> parts = new ArrayList<>();
        int end = s.length();
        for (int at = s.lastIndexOf(sep, end - sep.length()); at >= 0 && (max < 0 || parts.size() < max);
                at = s.lastIndexOf(sep, end - sep.length())) {
            parts.addFirst(s.substring(at + sep.length(), end));
            end = at;
        }
        parts.addFirst(s.substring(0, end));
        return parts;
    }

    private static String title(String s) {
        StringBuilder out = new StringBuilder(s.length());
        boolean previousCased = false;
        for (int i = 0; i < s.length(); ) {
            int cp = s.codePointAt(i);
            boolean cased = Character.isUpperCase(cp) || Character.isLowerCase(cp) || Character.isTitleCase(cp);
            out.appendCodePoint(previousCased ? Character.toLowerCase(cp) : Character.toTitleCase(cp));
            previousCased = cased;
            i += Character.charCount(cp);
        }
        return out.toString();
    }

    private static String replace(String s, String old, String replacement, int count) {
        if (count < 0) {
            return s.replace(old, replacement);
        }
        StringBuilder out = new StringBuilder();
        int start = 0;
        for (int n = 0; n < count; n++) {
            int at = s.indexOf(old, start);
            if (at < 0 || old.isEmpty()) {
                break;
            }
            out.append(s, start, at).append(replacement);
            start = at + old.length();
        }
        return out.append(s.substring(start)).toString();
    }

    private static long codePointIndex(String s, int charIndex) {
        return charIndex < 0 ? -1 : s.codePointCount(0, charIndex);
    }

    private static long count(String s, String sub) {
        if (sub.isEmpty()) {
            return s.codePointCount(0, s.length()) + 1;
        }
        long n = 0;
        for (int at = s.indexOf(sub); at >= 0; at = s.indexOf(sub, at + sub.length())) {
            n++;
        }
        return n;
    }

    private static String join(String separator, Object items) {
        if (!(items instanceof Iterable<?> iterable)) {
            throw new IllegalArgumentException("join expects a list");
        }
        StringBuilder out = new StringBuilder();
        boolean first = true;
        for (Object item : iterable) {
            if (!first) {
                out.append(separator);
            }
            out.append(item);
            first = false;
        }
        return out.toString();
    }
}
