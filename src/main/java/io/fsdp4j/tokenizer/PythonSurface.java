package io.fsdp4j.tokenizer;

import com.hubspot.jinjava.util.ForLoop;
import java.util.List;
import java.util.Map;
import java.util.Set;
import jinjava.javax.el.ELContext;

/**
 * The sandbox of chat templates: after {@link PythonStrings} (Python's {@code str} methods), only Python's
 * {@code dict} and {@code list} methods and {@code loop.cycle} may be called on values (and Jinjava its own filters
 * and tests); any other method call (a Java method such as {@code 'abc'.repeat(100000000)} or {@code getClass()})
 * stops the rendering with {@link Refused}. Resolves
 * nothing itself: an allowed call falls through to Jinjava's resolvers.
 */
final class PythonSurface extends MethodCallResolver {
    private static final Set<String> DICT = Set.of("items", "keys", "values", "get", "update", "pop", "setdefault",
            "copy");
    private static final Set<String> LIST = Set.of("append", "extend", "insert", "pop", "index", "count", "copy",
            "reverse");

    /** A template that asks for more than Python's surface; its message says what. */
    static final class Refused extends RuntimeException {
        Refused(String message) {
            super(message);
        }
    }

    @Override
    public Object invoke(ELContext context, Object base, Object method, Class<?>[] paramTypes, Object[] params) {
        if (base == null || method == null) {
            return null;
        }
        String name = method.toString();
        boolean allowed = base instanceof Map<?, ?> ? DICT.contains(name)
                : base instanceof List<?> ? LIST.contains(name)
                : base instanceof ForLoop ? name.equals("cycle")
                : isJinjava(base); // Jinjava calls its filters and tests as methods of its own objects
        if (!allowed) {
            throw new Refused("the chat template calls '" + name + "' on a " + kind(base) + ", which is not a"
                    + " Python method chat templates may use (str, dict and list methods)");
        }
        return null;
    }

    private static boolean isJinjava(Object base) {
        return base instanceof com.hubspot.jinjava.lib.filter.Filter
                || base instanceof com.hubspot.jinjava.lib.exptest.ExpTest
                || base.getClass().getName().startsWith("com.hubspot.jinjava.");
    }

    private static String kind(Object base) {
        return switch (base) {
            case String s -> "string";
            case Map<?, ?> m -> "dict";
            case List<?> l -> "list";
            case Number n -> "number";
            default -> "value";
        };
    }
}
