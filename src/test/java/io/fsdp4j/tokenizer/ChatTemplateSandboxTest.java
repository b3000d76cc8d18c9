package io.fsdp4j.tokenizer;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.fsdp4j.UserError;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/** Chat templates see Python's surface only (str, dict and list methods), within limits of size. */
class ChatTemplateSandboxTest {
    private static String render(String template) {
        return ChatTemplate.of(template).render(List.of(Message.user("hi")), false, Map.of());
    }

    @Test
    void javaMethodsAreRefused() {
        assertThatThrownBy(() -> render("{{ 'abc'.repeat(100000000) }}")).isInstanceOf(UserError.class)
                .hasMessage("the chat template calls 'repeat' on a string, which is not a Python method chat templates"
                        + " may use (str, dict and list methods)");
        assertThatThrownBy(() -> render("{{ messages[0].getClass() }}")).isInstanceOf(UserError.class)
                .hasMessageContaining("calls 'getClass' on a dict");
        assertThatThrownBy(() -> render("{{ messages.size() }}")).isInstanceOf(UserError.class)
                .hasMessageContaining("calls 'size' on a list");
    }

    @Test
    void pythonMethodsStillWork() {
        assertThat(render("{% for k, v in messages[0].items() %}{{ k }}={{ v }};{% endfor %}"
                + "{{ messages[0].get('role') }}{% set xs = [] %}{% do xs.append(1) %}{{ xs|length }}"
                + "{{ ' a '.strip().upper() }}{% for m in messages %}{{ loop.cycle('o', 'e') }}{% endfor %}"))
                .isEqualTo("role=user;content=hi;user1Ao");
    }

    @Test
    void outputBeyondTheLimitIsOneLine() {
        assertThatThrownBy(() -> render("{% set s = 'x' * 1000 %}{% for i in range(70000) %}{{ s }}{% endfor %}"))
                .isInstanceOf(UserError.class).hasMessageNotContaining("\n")
                .hasMessageContaining("chat template");
    }

    /** The renderer's first use (class loading, compilation: seconds on a busy machine) out of the timed tests. */
    @BeforeAll
    static void warmUp() {
        render("{% for m in messages %}{{ m.content }}{% endfor %}");
    }

    /** Renders under a time limit of {@code seconds}, as data.chat_template_timeout binds it. */
    private static String render(String template, double seconds) {
        return ScopedValue.where(ChatTemplate.TIME_LIMIT, seconds).call(() -> render(template));
    }

    @ParameterizedTest
    @ValueSource(strings = {
            "{% for i in range(1048576) %}{% for j in range(1048576) %}{{ i }}{% endfor %}{% endfor %}",
            "{% for i in range(1048576) %}{% for j in range(1048576) %}{% endfor %}{% endfor %}",
            "{% for i in range(1048576) %}{% for j in range(1048576) %}{% for k in range(1048576) %}{% endfor %}"
                    + "{% endfor %}{% endfor %}",
            "{% for m in messages %}{% for i in range(1048576) %}{% for j in range(1048576) %}{% if i > j %}x"
                    + "{% endif %}{% endfor %}{% endfor %}{% endfor %}"})
    void anEndlessLoopIsStoppedAtTheTimeLimit(String template) {
        long start = System.nanoTime();
        assertThatThrownBy(() -> render(template, 0.2)).isInstanceOf(UserError.class)
                .hasMessage("the chat template took more than 0.2 s to render one conversation and was stopped (an"
                        + " endless loop?); if it is only slow, raise data.chat_template_timeout"
                        + " (--chat-template-timeout)");
        assertThat((System.nanoTime() - start) / 1e9).isLessThan(3.0);
        // the limit is per rendering: the next one on this thread starts afresh
        assertThat(render("{{ messages[0].content }}", 0.2)).isEqualTo("hi");
        assertThat(render("{{ messages[0].content }}")).isEqualTo("hi");
    }

    @Test
    void theLimitHoldsInsideMacrosToo() {
        // Jinjava records an exception inside a macro call as an error and renders on: the limit is still kept
        long start = System.nanoTime();
        assertThatThrownBy(() -> render("{% macro f() %}{% for i in range(1048576) %}{% for j in range(1048576) %}"
                + "{{ j }}{% endfor %}{% endfor %}{% endmacro %}{{ f() }}{{ f() }}", 0.2))
                .isInstanceOf(UserError.class).hasMessageStartingWith("the chat template took more than 0.2 s");
        assertThat((System.nanoTime() - start) / 1e9).isLessThan(3.0);
    }
}
