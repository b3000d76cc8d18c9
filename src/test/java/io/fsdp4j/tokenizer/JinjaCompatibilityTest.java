package io.fsdp4j.tokenizer;

import static org.assertj.core.api.Assertions.assertThat;

import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

/** The pieces that make Jinjava render as Python's Jinja: template rewrites, str methods, json.dumps. */
class JinjaCompatibilityTest {

    @Test
    void reversedSlicesBecomeTheReverseFilter() {
        assertThat(JinjaRewrite.rewrite("{%- for m in messages[::-1] %}x{% endfor %}"))
                .isEqualTo("{%- for m in messages|reverse %}x{% endfor %}");
        assertThat(JinjaRewrite.rewrite("{{ xs[ : : -1 ] }}")).isEqualTo("{{ xs|reverse }}");
        assertThat(JinjaRewrite.rewrite("{{ xs[1:] }} {{ xs[:-1] }}")).isEqualTo("{{ xs[1:] }} {{ xs[:-1] }}");
    }

    @Test
    void keywordValuesAreParenthesised() {
        assertThat(JinjaRewrite.rewrite("{%- set ns = namespace(a=true, n=messages|length - 1) %}"))
                .isEqualTo("{%- set ns = namespace(a=(true), n=(messages|length - 1)) %}");
        assertThat(JinjaRewrite.rewrite("{{ x | tojson(indent=2) }} {{ f(g(a=1), b = [1, 2]) }}"))
                .isEqualTo("{{ x | tojson(indent=(2)) }} {{ f(g(a=(1)), b =( [1, 2])) }}");
        // Comparisons, strings, text, comments and macro signatures are left alone.
        assertThat(JinjaRewrite.rewrite("{{ f(a == b, 'k=v') }}")).isEqualTo("{{ f(a == b, 'k=v') }}");
        assertThat(JinjaRewrite.rewrite("text f(a=1) {# f(a=1) #}")).isEqualTo("text f(a=1) {# f(a=1) #}");
        assertThat(JinjaRewrite.rewrite("{% macro m(a, b='z') %}{% endmacro %}"))
                .isEqualTo("{% macro m(a, b='z') %}{% endmacro %}");
        assertThat(JinjaRewrite.rewrite("{% raw %}{{ f(a=1)[::-1] }}{% endraw %}"))
                .isEqualTo("{% raw %}{{ f(a=1)[::-1] }}{% endraw %}");
    }

    @Test
    void lineBreaksAsJinjaReadsThem() {
        assertThat(JinjaRewrite.rewrite("a\r\nb\rc\n")).isEqualTo("a\nb\nc");
        assertThat(JinjaRewrite.rewrite("a\n\n")).isEqualTo("a\n");
    }

    @Test
    void pythonSplitAndStrip() {
        assertThat(PythonStrings.split("  a \t b\n", new Object[0])).containsExactly("a", "b");
        assertThat(PythonStrings.split("a  b c", new Object[] {null, 1L})).containsExactly("a", "b c");
        assertThat(PythonStrings.split("a,,b", new Object[] {","})).containsExactly("a", "", "b");
        assertThat(PythonStrings.split("a,b,c", new Object[] {",", 1L})).containsExactly("a", "b,c");
        assertThat(PythonStrings.rsplit("a,b,c", new Object[] {",", 1L})).containsExactly("a,b", "c");
        assertThat(PythonStrings.lstrip("\u00a0\u3000 x ", null)).isEqualTo("x ");
        assertThat(PythonStrings.rstrip("x\n\n", "\n")).isEqualTo("x");
        assertThat(PythonStrings.lstrip("🙂🙂x", "🙂")).isEqualTo("x");
    }

    @Test
    void pythonJsonDumps() {
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("name", "get_weather");
        m.put("args", List.of(1, 2.5, "ü\n\"", true));
        m.put("none", null);
        assertThat(PythonJson.dumps(m, null, false))
                .isEqualTo("{\"name\": \"get_weather\", \"args\": [1, 2.5, \"ü\\n\\\"\", true], \"none\": null}");
        assertThat(PythonJson.dumps(m, null, true))
                .isEqualTo("{\"args\": [1, 2.5, \"ü\\n\\\"\", true], \"name\": \"get_weather\", \"none\": null}");
        assertThat(PythonJson.dumps(List.of(), 2, false)).isEqualTo("[]");
        assertThat(PythonJson.dumps(Map.of("a", List.of(1)), 2, false)).isEqualTo("{\n  \"a\": [\n    1\n  ]\n}");
    }

    @Test
    void pythonFloatRepr() {
        assertThat(PythonJson.pythonFloat(1.0)).isEqualTo("1.0");
        assertThat(PythonJson.pythonFloat(0.1)).isEqualTo("0.1");
        assertThat(PythonJson.pythonFloat(0.0001)).isEqualTo("0.0001");
        assertThat(PythonJson.pythonFloat(0.00001)).isEqualTo("1e-05");
        assertThat(PythonJson.pythonFloat(-1.5e-7)).isEqualTo("-1.5e-07");
        assertThat(PythonJson.pythonFloat(1e16)).isEqualTo("1e+16");
        assertThat(PythonJson.pythonFloat(123456789012345.0)).isEqualTo("123456789012345.0");
        assertThat(PythonJson.pythonFloat(-0.0)).isEqualTo("-0.0");
    }
}
