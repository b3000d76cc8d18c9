package io.fsdp4j.tokenizer;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.fsdp4j.UserError;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

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
}
