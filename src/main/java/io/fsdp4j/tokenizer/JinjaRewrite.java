package io.fsdp4j.tokenizer;

import java.util.ArrayDeque;
import java.util.Deque;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * A chat template made ready for Jinjava: line breaks as Jinja reads them ({@link #jinjaNewlines}), and two Jinja
 * spellings that chat templates use and Jinjava's parser reads differently rewritten, inside {@code {{ }}} and
 * {@code {% %}} only (text, comments and raw blocks are left as they are):
 * <ul>
 *   <li>{@code xs[::-1]} (a reversed copy; Jinjava's slices have no step) becomes {@code xs|reverse};</li>
 *   <li>a keyword argument's value is parenthesised, {@code namespace(n=messages|length - 1)} becomes
 *       {@code namespace(n=(messages|length - 1))}: Jinjava binds {@code =} as tightly as {@code +} and
 *       {@code -}, and would subtract 1 from the named parameter.</li>
 * </ul>
 */
final class JinjaRewrite {
    private static final Pattern REVERSE = Pattern.compile("\\[\\s*:\\s*:\\s*-\\s*1\\s*]");
    private static final Pattern KEYWORD = Pattern.compile("\\s*([A-Za-z_][A-Za-z0-9_]*)\\s*=(?!=)");
    private static final Pattern RAW = Pattern.compile("\\{%[-+]?\\s*raw\\s*[-+]?%}");
    private static final Pattern END_RAW = Pattern.compile("\\{%[-+]?\\s*endraw\\s*[-+]?%}");
    private static final Pattern MACRO = Pattern.compile("^[-+]?\\s*macro\\b");

    private JinjaRewrite() {}

    static String rewrite(String source) {
        String template = jinjaNewlines(source);
        StringBuilder out = new StringBuilder(template.length() + 64);
        int i = 0;
        while (i < template.length()) {
            int open = nextOpening(template, i);
            if (open < 0) {
                out.append(template, i, template.length());
                break;
            }
            out.append(template, i, open);
            char kind = template.charAt(open + 1);
            if (kind == '#') {
                int end = template.indexOf("#}", open + 2);
                end = end < 0 ? template.length() : end + 2;
                out.append(template, open, end);
                i = end;
                continue;
            }
            Matcher raw = RAW.matcher(template).region(open, template.length());
            if (kind == '%' && raw.lookingAt()) {
                Matcher endRaw = END_RAW.matcher(template);
                int end = endRaw.find(raw.end()) ? endRaw.end() : template.length();
                out.append(template, open, end);
                i = end;
                continue;
            }
            String close = kind == '{' ? "}}" : "%}";
            int end = closing(template, open + 2, close);
            String inside = template.substring(open + 2, end);
            out.append(template, open, open + 2);
            out.append(kind == '%' && MACRO.matcher(inside.stripLeading()).find() ? inside : expression(inside));
            i = Math.min(end + 2, template.length());
            out.append(template, end, i);
        }
        return out.toString();
    }

    /**
     * What Jinja's lexer does to a template first: every line break becomes "\n", and one final line break is
     * dropped ({@code keep_trailing_newline=False}).
     */
    static String jinjaNewlines(String source) {
        String s = source.replace("\r\n", "\n").replace('\r', '\n');
        return s.endsWith("\n") ? s.substring(0, s.length() - 1) : s;
    }

    private static int nextOpening(String s, int from) {
        for (int i = s.indexOf('{', from); i >= 0 && i + 1 < s.length(); i = s.indexOf('{', i + 1)) {
            char next = s.charAt(i + 1);
            if (next == '{' || next == '%' || next == '#') {
                return i;
            }
        }
        return -1;
    }

    /** Where {@code close} ends the tag that starts at {@code from}, skipping string literals. */
    private static int closing(String s, int from, String close) {
        char quote = 0;
        for (int i = from; i < s.length(); i++) {
            char c = s.charAt(i);
            if (quote != 0) {
                if (c == '\\') {
                    i++;
                } else if (c == quote) {
                    quote = 0;
                }
            } else if (c == '\'' || c == '"') {
                quote = c;
            } else if (s.startsWith(close, i)) {
                return i;
            }
        }
        return s.length();
    }

    /** The expression with both rewrites applied outside its string literals. */
    static String expression(String e) {
        StringBuilder out = new StringBuilder(e.length() + 16);
        // One entry per open bracket: '(' entries say whether a keyword value is open (its ')' still owed).
        Deque<boolean[]> parens = new ArrayDeque<>();
        Deque<Character> brackets = new ArrayDeque<>();
        boolean argumentStart = false;
        for (int i = 0; i < e.length(); i++) {
            char c = e.charAt(i);
            if (c == '\'' || c == '"') {
                int end = i + 1;
                while (end < e.length() && e.charAt(end) != c) {
                    end += e.charAt(end) == '\\' ? 2 : 1;
                }
                end = Math.min(end + 1, e.length());
                out.append(e, i, end);
                i = end - 1;
                argumentStart = false;
                continue;
            }
            if (argumentStart && brackets.peek() != null && brackets.peek() == '(') {
                Matcher keyword = KEYWORD.matcher(e).region(i, e.length());
                if (keyword.lookingAt()) {
                    out.append(e, i, keyword.end()).append('(');
                    parens.peek()[0] = true;
                    i = keyword.end() - 1;
                    argumentStart = false;
                    continue;
                }
            }
            argumentStart = false;
            switch (c) {
                case '[' -> {
                    Matcher reverse = REVERSE.matcher(e).region(i, e.length());
                    if (reverse.lookingAt()) {
                        out.append("|reverse");
                        i = reverse.end() - 1;
                        continue;
                    }
                    brackets.push('[');
                    out.append(c);
                }
                case '{' -> {
                    brackets.push('{');
                    out.append(c);
                }
                case '(' -> {
                    brackets.push('(');
                    parens.push(new boolean[1]);
                    out.append(c);
                    argumentStart = true;
                }
                case ',' -> {
                    if (brackets.peek() != null && brackets.peek() == '(') {
                        closeKeyword(out, parens);
                        argumentStart = true;
                    }
                    out.append(c);
                }
                case ')', ']', '}' -> {
                    if (c == ')' && brackets.peek() != null && brackets.peek() == '(') {
                        closeKeyword(out, parens);
                        parens.pop();
                    }
                    if (!brackets.isEmpty()) {
                        brackets.pop();
                    }
                    out.append(c);
                }
                default -> out.append(c);
            }
        }
        return out.toString();
    }

    private static void closeKeyword(StringBuilder out, Deque<boolean[]> parens) {
        boolean[] open = parens.peek();
        if (open != null && open[0]) {
            out.append(')');
            open[0] = false;
        }
    }
}
