package io.fsdp4j.tokenizer;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import com.fasterxml.jackson.databind.JsonNode;
import io.fsdp4j.UserError;
import java.io.IOException;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * Chat templates render as transformers renders them. The Qwen3 and Llama 3 templates against
 * chat-templates.json (written by @huggingface/jinja in tools/tokenizer-oracle, and equal to Python Jinja2 3.1.6 in
 * transformers' environment); single constructs against the output of Python Jinja2 in that environment.
 */
class ChatTemplateTest {

    static Stream<Arguments> modelTemplates() throws IOException {
        JsonNode file = TestTokenizers.JSON.readTree(TestTokenizers.resource("chat-templates.json").toFile());
        List<Arguments> cases = new ArrayList<>();
        file.get("expected").properties().forEach(model -> model.getValue().properties().forEach(c -> {
            String[] key = c.getKey().split("/");
            List<Message> messages = new ArrayList<>();
            for (JsonNode m : file.get("conversations").get(key[0])) {
                messages.add(new Message(m.get("role").asText(), m.get("content").asText()));
            }
            cases.add(Arguments.of(model.getKey(), c.getKey(), messages, key[1].equals("prompt"), c.getValue().asText()));
        }));
        return cases.stream();
    }

    @ParameterizedTest(name = "{0} {1}")
    @MethodSource("modelTemplates")
    void modelTemplatesRenderAsTheOracle(String model, String conversation, List<Message> messages,
            boolean addGenerationPrompt, String expected) {
        Tokenizer tok = TestTokenizers.tokenizer(model);
        assertThat(tok.applyChatTemplate(messages, addGenerationPrompt)).isEqualTo(expected);
    }

    @Test
    void qwen3KeepsOnlyTheLastTurnsReasoning() {
        Tokenizer tok = TestTokenizers.tokenizer("qwen3");
        String text = tok.applyChatTemplate(List.of(
                Message.user("a"),
                Message.assistant("<think>\nr1\n</think>\n\nA1"),
                Message.user("b"),
                Message.assistant("<think>\nr2\n</think>\n\nA2")), false);
        assertThat(text).isEqualTo("<|im_start|>user\na<|im_end|>\n<|im_start|>assistant\nA1<|im_end|>\n"
                + "<|im_start|>user\nb<|im_end|>\n<|im_start|>assistant\n<think>\nr2\n</think>\n\nA2<|im_end|>\n");
    }

    @Test
    void variablesReachTheTemplate() {
        String source = TestTokenizers.tokenizer("qwen3").chatTemplate().orElseThrow();
        String text = ChatTemplate.of(source).render(List.of(Message.user("hi")), true, Map.of("enable_thinking", false));
        assertThat(text).isEqualTo("<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n");
    }

    @Test
    void raiseExceptionIsAUserError() {
        ChatTemplate t = ChatTemplate.of("{% if messages[0].role != 'user' %}"
                + "{{ raise_exception('Conversations must start with a user message') }}{% endif %}ok");
        assertThat(t.render(List.of(Message.user("x")), false, Map.of())).isEqualTo("ok");
        assertThatThrownBy(() -> t.render(List.of(Message.assistant("x")), false, Map.of()))
                .isInstanceOf(UserError.class)
                .hasMessage("the chat template refused the conversation: Conversations must start with a user message");
    }

    @Test
    void aSyntaxErrorIsAUserError() {
        assertThatThrownBy(() -> ChatTemplate.of("{% for m in messages %}{{ m.role }").render(List.of(), false, Map.of()))
                .isInstanceOf(UserError.class)
                .hasMessageStartingWith("chat template error");
    }

    @Test
    void aTokenizerWithoutTemplateSaysSo() {
        Tokenizer tok = TestTokenizers.tokenizer("llama2");
        assertThat(tok.chatTemplate()).isEmpty();
        assertThatThrownBy(() -> tok.applyChatTemplate(List.of(Message.user("x")), true))
                .isInstanceOf(UserError.class)
                .hasMessageContaining("no chat template");
    }

    /** (name, template, expected): expected as Python Jinja2 3.1.6 renders it with trim_blocks, lstrip_blocks, loopcontrols. */
    static Stream<Arguments> constructs() {
        return Stream.of(
                Arguments.of("slice from", "{% for m in messages[1:] %}{{ m.role }},{% endfor %}", "user,assistant,"),
                Arguments.of("slice to", "{% for m in messages[:-1] %}{{ m.role }},{% endfor %}", "system,user,"),
                Arguments.of("reversed", "{% for m in messages[::-1] %}{{ m.role }},{% endfor %}", "assistant,user,system,"),
                Arguments.of("namespace", "{% set ns = namespace(a=1, b=messages|length - 1) %}{% for m in messages %}"
                        + "{% set ns.a = ns.a + 1 %}{% endfor %}{{ ns.a }}/{{ ns.b }}", "4/2"),
                Arguments.of("str methods", "{{ '  Abc  '.strip() }}|{{ 'xxabcxx'.strip('x') }}|{{ 'abc'.upper() }}|"
                        + "{{ 'ABC'.lower() }}|{{ 'a b'.title() }}|{{ 'abc'.startswith('ab') and 'abc'.endswith('bc') }}",
                        "Abc|abc|ABC|abc|A B|" + "true"),
                Arguments.of("split", "{{ 'a,b,,c'.split(',') | length }}|{{ ' a  b '.split() | join('-') }}|"
                        + "{{ 'a<x>b'.split('<x>')[-1] }}|{{ 'a b c'.split(' ', 1)[1] }}", "4|a-b|b|b c"),
                Arguments.of("replace find", "{{ 'aXbX'.replace('X', 'y') }}|{{ 'abc'.find('c') }}|{{ 'hello'.capitalize() }}",
                        "ayby|2|Hello"),
                Arguments.of("join", "{{ ', '.join(['a', 'b']) }}", "a, b"),
                Arguments.of("lstrip rstrip", "[{{ '\\n\\nx\\n'.lstrip('\\n') }}][{{ 'x\\n\\n'.rstrip('\\n') }}]", "[x\n][x]"),
                Arguments.of("items", "{% for k, v in {'a': 1, 'b': 2}.items() %}{{ k }}={{ v }};{% endfor %}", "a=1;b=2;"),
                Arguments.of("trim length", "{{ '  x  ' | trim }}|{{ messages | length }}", "x|3"),
                Arguments.of("break", "{% for m in messages %}{% if loop.index0 == 1 %}{% break %}{% endif %}{{ m.role }}{% endfor %}",
                        "system"),
                Arguments.of("tilde", "{{ 'a' ~ 1 ~ 'b' }}", "a1b"),
                Arguments.of("index", "{{ messages[0]['content'] }}|{{ messages[-1].role }}", "Be brief.|assistant"),
                Arguments.of("in", "{{ 'b' in 'abc' and 'z' not in 'abc' and 'user' in ['user', 'x'] }}", "true"),
                Arguments.of("whitespace control", "  {%- for m in messages %}\n    {{- m.role }}\n  {% endfor %}\n{{ 'end' }}\n",
                        "system\nuser\nassistant\nend"),
                Arguments.of("trim and lstrip blocks", "{% for m in messages %}\n  {% if m.role == 'user' %}\n"
                        + "    U:{{ m.content }}\n  {% endif %}\n{% endfor %}", "    U:Héllo 👋🏽 世界\n"),
                Arguments.of("get with default", "{{ messages[0].get('nope', 'dflt') }}|{{ messages[0].get('role') }}",
                        "dflt|system"),
                Arguments.of("arithmetic", "{{ 7 // 2 }}|{{ 7 % 3 }}|{{ 2 * 3 + 1 }}|{{ 10 / 4 }}", "3|1|7|2.5"),
                Arguments.of("defined", "{{ missing | default('d') }}|{{ 'y' if missing is not defined }}|"
                        + "{{ 'n' if messages[0].nothing is defined else 'u' }}", "d|y|u"),
                Arguments.of("selectattr map", "{{ messages | selectattr('role', 'equalto', 'user') | list | length }}|"
                        + "{{ messages | map(attribute='role') | join(',') }}", "1|system,user,assistant"),
                Arguments.of("tojson", "{{ messages[0] | tojson }}|{{ 'a\"b' | tojson }}|{{ [1, 2.5, none, true] | tojson }}",
                        "{\"role\": \"system\", \"content\": \"Be brief.\"}|\"a\\\"b\"|[1, 2.5, null, true]"),
                Arguments.of("tojson indent", "{{ {'a': [1, 2]} | tojson(indent=2) }}", "{\n  \"a\": [\n    1,\n    2\n  ]\n}"),
                Arguments.of("escapes", "{{ 'a\\nb' }}|{{ \"q'q\" }}|{{ '<&>' }}", "a\nb|q'q|<&>"),
                Arguments.of("set block", "{% set x %}hello {{ messages[0].role }}{% endset %}{{ x | upper }}", "HELLO SYSTEM"),
                Arguments.of("macro", "{% macro f(a, b='z') %}[{{ a }}{{ b }}]{% endmacro %}{{ f('x') }}{{ f('x', 'y') }}",
                        "[xz][xy]"),
                Arguments.of("concatenation", "{{ messages[0].role + ':' + messages[0].content }}", "system:Be brief."),
                Arguments.of("generation block", "{% for m in messages %}{% if m.role == 'assistant' %}{% generation %}"
                        + "{{ m.content }}{% endgeneration %}{% endif %}{% endfor %}", "Sure."),
                Arguments.of("comment", "{# a {{ comment }} #}{{ messages[0].role }}", "system"));
    }

    @ParameterizedTest(name = "{0}")
    @MethodSource("constructs")
    void constructsRenderAsPythonJinja(String name, String template, String expected) {
        List<Message> messages = List.of(Message.system("Be brief."), Message.user("Héllo 👋🏽 世界"), Message.assistant("Sure."));
        assertThat(ChatTemplate.of(template).render(messages, false, Map.of())).isEqualTo(expected);
    }
}
