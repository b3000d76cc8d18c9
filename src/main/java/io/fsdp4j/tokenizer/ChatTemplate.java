package io.fsdp4j.tokenizer;

import com.hubspot.jinjava.Jinjava;
import com.hubspot.jinjava.JinjavaConfig;
import com.hubspot.jinjava.LegacyOverrides;
import com.hubspot.jinjava.el.JinjavaInterpreterResolver;
import com.hubspot.jinjava.interpret.JinjavaInterpreter;
import com.hubspot.jinjava.interpret.RenderResult;
import com.hubspot.jinjava.interpret.TemplateError;
import com.hubspot.jinjava.lib.filter.Filter;
import com.hubspot.jinjava.lib.fn.ELFunctionDefinition;
import com.hubspot.jinjava.lib.tag.Tag;
import com.hubspot.jinjava.objects.date.StrftimeFormatter;
import com.hubspot.jinjava.tree.Node;
import com.hubspot.jinjava.tree.TagNode;
import io.fsdp4j.UserError;
import java.time.ZonedDateTime;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import jinjava.javax.el.CompositeELResolver;

/**
 * A Hugging Face chat template (Jinja) rendered with Jinjava, set up to behave as transformers' environment:
 * {@code trim_blocks} and {@code lstrip_blocks}, {@code {%- -%}} whitespace control, loop controls
 * ({@code break}/{@code continue}), Python string methods ({@link PythonStrings}), {@code raise_exception},
 * {@code strftime_now}, a Python-style {@code tojson}, the {@code {% generation %}} block, and the
 * {@link JinjaRewrite rewrites} of two spellings Jinjava parses differently.
 *
 * <p>Known differences from Python's Jinja: booleans print as {@code true}/{@code false} and None as an empty
 * string, and {@code |length} of a string counts UTF-16 units. Chat templates compare booleans and test for None
 * rather than print them.
 */
public final class ChatTemplate {
    /** The most characters a rendering (and any string in it) may have: 64 Mi. */
    static final long MAX_OUTPUT = 64L << 20;
    /** The longest one rendering may take unless {@link #TIME_LIMIT} says otherwise ({@code data.chat_template_timeout}). */
    public static final double DEFAULT_TIME_LIMIT_SECONDS = 30; // a first rendering on a busy machine: seconds
    /**
     * Seconds one rendering may take, where the caller binds it ({@code data.chat_template_timeout}); a template
     * that takes longer (an endless loop: nested {@code range}s) is stopped with a {@link UserError}.
     */
    public static final ScopedValue<Double> TIME_LIMIT = ScopedValue.newInstance();
    /**
     * When this thread's rendering must end ({@link System#nanoTime}), checked before each node is rendered, and
     * whether it was reached (1): Jinjava turns an exception inside a macro call into a recorded error and goes on.
     */
    private static final ThreadLocal<long[]> DEADLINE = ThreadLocal.withInitial(() -> new long[] {Long.MAX_VALUE, 0});
    private static final Jinjava JINJAVA = newJinjava();
    /** Unicode noncharacters that bracket what a {@code {% generation %}} block writes; never in a rendering. */
    static final char GENERATION_START = '\uFDD0';
    static final char GENERATION_END = '\uFDD1';
    private static final java.util.regex.Pattern GENERATION =
            java.util.regex.Pattern.compile("\\{%[-+]?\\s*generation\\s*[-+]?%}");

    private final String source;
    private final String compiled;

    private ChatTemplate(String source) {
        this.source = source;
        this.compiled = JinjaRewrite.rewrite(source);
    }

    /** A template from its Jinja source (a tokenizer_config.json's {@code chat_template}). */
    public static ChatTemplate of(String source) {
        return new ChatTemplate(source);
    }

    public String source() {
        return source;
    }

    /**
     * Renders {@code messages}: the template sees them as {@code messages} (a list of {role, content} maps),
     * {@code add_generation_prompt}, and {@code variables} (special tokens, or {@code enable_thinking} and the like).
     */
    public String render(List<Message> messages, boolean addGenerationPrompt, Map<String, ?> variables) {
        List<Map<String, Object>> turns = new ArrayList<>(messages.size());
        for (Message m : messages) {
            Map<String, Object> turn = new LinkedHashMap<>();
            turn.put("role", m.role());
            turn.put("content", m.content());
            turns.add(turn);
        }
        return renderMarked(turns, addGenerationPrompt, variables).text();
    }

    /**
     * A rendering and the character ranges {@code [start, end)} of its text that {@code {% generation %}} blocks
     * wrote (none for a template without them), as transformers records them for
     * {@code return_assistant_tokens_mask}.
     */
    public record Rendering(String text, List<int[]> generated) {}

    /** True when the template marks the assistant's text with {@code {% generation %}} blocks. */
    public boolean hasGenerationBlocks() {
        return GENERATION.matcher(source).find();
    }

    /**
     * Renders {@code messages} given as the maps a dataset holds ({@code role}, {@code content}, and whatever else
     * the template reads: {@code tool_calls}, {@code name}, ...), with the {@code {% generation %}} ranges.
     * {@code variables} may add {@code tools} and the like.
     */
    public Rendering renderMarked(List<? extends Map<String, ?>> messages, boolean addGenerationPrompt,
                                  Map<String, ?> variables) {
        Map<String, Object> context = new HashMap<>(variables);
        context.put("messages", messages);
        context.put("add_generation_prompt", addGenerationPrompt);
        double limit = TIME_LIMIT.orElse(DEFAULT_TIME_LIMIT_SECONDS);
        long[] deadline = DEADLINE.get();
        long outer = deadline[0]; // a rendering inside another (none today) keeps the outer one's deadline too
        deadline[0] = Math.min(outer, System.nanoTime() + (long) (limit * 1e9));
        deadline[1] = 0;
        RenderResult result;
        try {
            result = JINJAVA.renderForResult(compiled, context);
            if (deadline[1] != 0) { // reached where Jinjava caught it
                throw timeLimit(limit);
            }
        } catch (TimeLimitReached e) {
            throw timeLimit(limit);
        } finally {
            deadline[0] = outer;
            deadline[1] = 0;
        }
        for (TemplateError error : result.getErrors()) {
            if (error.getSeverity() == TemplateError.ErrorType.FATAL) {
                throw failure(error);
            }
        }
        String marked = result.getOutput();
        StringBuilder text = new StringBuilder(marked.length());
        List<int[]> generated = new ArrayList<>();
        int open = -1;
        for (int i = 0; i < marked.length(); i++) {
            char c = marked.charAt(i);
            if (c == GENERATION_START) {
                open = text.length();
            } else if (c == GENERATION_END) {
                if (open >= 0 && text.length() > open) {
                    generated.add(new int[] {open, text.length()});
                }
                open = -1;
            } else {
                text.append(c);
            }
        }
        return new Rendering(text.toString(), List.copyOf(generated));
    }

    /** True when {@code s} holds a character the renderer uses to mark {@code {% generation %}} blocks. */
    public static boolean hasMarkers(String s) {
        return s.indexOf(GENERATION_START) >= 0 || s.indexOf(GENERATION_END) >= 0;
    }

    private static UserError timeLimit(double seconds) {
        return new UserError(String.format(java.util.Locale.ROOT, "the chat template took more than %s s to render "
                + "one conversation and was stopped (an endless loop?); if it is only slow, raise "
                + "data.chat_template_timeout (--chat-template-timeout)", new java.math.BigDecimal(Double.toString(
                        seconds)).stripTrailingZeros().toPlainString()));
    }

    private static UserError failure(TemplateError error) {
        for (Throwable t = error.getException(); t != null; t = t.getCause()) {
            if (t instanceof TimeLimitReached) {
                return timeLimit(TIME_LIMIT.orElse(DEFAULT_TIME_LIMIT_SECONDS));
            }
            if (t instanceof TemplateRaised raised) {
                return new UserError("the chat template refused the conversation: " + raised.getMessage());
            }
            if (t instanceof PythonSurface.Refused refused) {
                return new UserError(refused.getMessage());
            }
        }
        return new UserError("chat template error at line " + error.getLineno() + ": " + error.getMessage());
    }

    private static Jinjava newJinjava() {
        CompositeELResolver resolver = new CompositeELResolver();
        resolver.add(new PythonStrings());
        resolver.add(new PythonSurface());
        resolver.add(JinjavaInterpreterResolver.DEFAULT_RESOLVER_READ_WRITE);
        JinjavaConfig config = JinjavaConfig.newBuilder()
                .withTrimBlocks(true)
                .withLstripBlocks(true)
                .withFailOnUnknownTokens(false)
                .withMaxOutputSize(MAX_OUTPUT)
                .withMaxStringLength(MAX_OUTPUT)
                .withMaxListSize(1 << 20)
                .withMaxMapSize(1 << 20)
                .withRangeLimit(1 << 20)
                .withElResolver(resolver)
                .withNodePreProcessor(ChatTemplate::beforeNode)
                .withLegacyOverrides(LegacyOverrides.newBuilder()
                        .withParseWhitespaceControlStrictly(true)
                        .withUseTrimmingForNotesAndExpressions(true)
                        .withUseNaturalOperatorPrecedence(true)
                        .withKeepNullableLoopValues(true)
                        .withEvaluateMapKeys(true)
                        .withIterateOverMapKeys(true)
                        .withUseSnakeCasePropertyNaming(true)
                        .withAllowAdjacentTextNodes(true)
                        .withHandleBackslashInQuotesOnly(true)
                        .build())
                .build();
        Jinjava jinjava = new Jinjava(config);
        jinjava.registerFunction(new ELFunctionDefinition("", "raise_exception", ChatTemplate.class,
                "raiseException", String.class));
        jinjava.registerFunction(new ELFunctionDefinition("", "strftime_now", ChatTemplate.class,
                "strftimeNow", String.class));
        jinjava.registerFilter(new ToJson());
        jinjava.registerTag(new GenerationTag());
        return jinjava;
    }

    /**
     * Before each node: Jinjava's own step (the current node, for error lines), then the time limit. Every loop
     * iteration renders its body's nodes, so an endless loop passes here between any two iterations that do work.
     */
    private static void beforeNode(Node node, JinjavaInterpreter interpreter) {
        interpreter.getContext().setCurrentNode(node);
        long[] deadline = DEADLINE.get();
        if (System.nanoTime() - deadline[0] > 0) {
            deadline[1] = 1;
            throw new TimeLimitReached();
        }
    }

    /** Thrown out of a rendering that ran past its deadline. */
    private static final class TimeLimitReached extends RuntimeException {
        TimeLimitReached() {
            super("the chat template ran past its time limit", null, false, false);
        }
    }

    /** {@code raise_exception(message)}: the template rejects its input. */
    public static Object raiseException(String message) {
        throw new TemplateRaised(message);
    }

    /** {@code strftime_now(format)}: the current local time in Python's strftime format. */
    public static String strftimeNow(String format) {
        return StrftimeFormatter.format(ZonedDateTime.now(), format);
    }

    private static final class TemplateRaised extends RuntimeException {
        TemplateRaised(String message) {
            super(message);
        }
    }

    /** transformers' {@code tojson}: Python's json.dumps with ensure_ascii=False; {@code indent}, {@code sort_keys}. */
    private static final class ToJson implements Filter {
        @Override
        public String getName() {
            return "tojson";
        }

        @Override
        public Object filter(Object var, JinjavaInterpreter interpreter, String... args) {
            return filter(var, interpreter, args, Map.of());
        }

        @Override
        public Object filter(Object var, JinjavaInterpreter interpreter, Object[] args, Map<String, Object> kwargs) {
            Object indent = kwargs.getOrDefault("indent", args.length > 0 ? args[0] : null);
            boolean sortKeys = Boolean.parseBoolean(String.valueOf(kwargs.getOrDefault("sort_keys", false)));
            Integer spaces = indent == null ? null : Integer.valueOf(Integer.parseInt(indent.toString()));
            return PythonJson.dumps(var, spaces, sortKeys);
        }
    }

    /**
     * {@code {% generation %}...{% endgeneration %}}: transformers marks the assistant's tokens with it (for
     * {@code return_assistant_tokens_mask}); it renders its body between two markers that {@link #renderMarked}
     * takes out.
     */
    private static final class GenerationTag implements Tag {
        private static final long serialVersionUID = 1L;

        @Override
        public String getName() {
            return "generation";
        }

        @Override
        public String interpret(TagNode tagNode, JinjavaInterpreter interpreter) {
            StringBuilder out = new StringBuilder().append(GENERATION_START);
            for (Node child : tagNode.getChildren()) {
                out.append(child.render(interpreter));
            }
            return out.append(GENERATION_END).toString();
        }
    }
}
