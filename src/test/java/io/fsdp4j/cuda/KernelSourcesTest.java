package io.fsdp4j.cuda;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayDeque;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Set;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;

/**
 * The kernel sources as NVRTC receives them ({@link CudaKernels#program}), checked without a GPU or a compiler:
 * every {@code #include} names a header handed to NVRTC with the program, and comes before the first use of what
 * the header defines; no kernel file defines again (pastes) what {@code common.cuh} defines; the translation unit
 * that NVRTC preprocesses (the file with its headers spliced in) has balanced brackets. The compile itself is
 * {@code tools/kernels/check.sh} (nvcc, no GPU) and the GPU tests.
 */
class KernelSourcesTest {
    private static final Path KERNELS = Path.of("src/main/resources/kernels");
    private static final Pattern INCLUDE = Pattern.compile("(?m)^[ \\t]*#[ \\t]*include[ \\t]*([\"<])([^\">]+)[\">]");
    private static final Pattern DEFINITION = Pattern.compile(
            "(?m)^[ \\t]*(?:#define[ \\t]+(\\w+)|typedef\\b[^;]*?\\b(\\w+)[ \\t]*;|__device__\\b[^;{=]*?\\b(\\w+)[ \\t]*\\()");

    private static List<String> kernelFiles() throws IOException {
        try (Stream<Path> files = Files.list(KERNELS)) {
            return files.map(p -> p.getFileName().toString()).filter(n -> n.endsWith(".cu"))
                    .map(n -> n.substring(0, n.length() - 3)).sorted().toList();
        }
    }

    @Test
    void everyHeaderBesideTheKernelsIsHandedToNvrtc() throws IOException {
        try (Stream<Path> files = Files.list(KERNELS)) {
            assertThat(files.map(p -> p.getFileName().toString()).filter(n -> n.endsWith(".cuh")))
                    .containsExactlyInAnyOrderElementsOf(CudaKernels.HEADERS);
        }
    }

    @Test
    void everyIncludeResolvesToAHeaderOfTheProgramAndHeadersIncludeNothing() throws IOException {
        assertThat(kernelFiles()).hasSizeGreaterThanOrEqualTo(12);
        for (String file : kernelFiles()) {
            Nvrtc.Program program = CudaKernels.program(file);
            assertThat(program.headers().keySet()).as(file).containsExactlyElementsOf(CudaKernels.HEADERS);
            Matcher m = INCLUDE.matcher(stripComments(program.source()));
            int includes = 0;
            while (m.find()) {
                includes++;
                assertThat(m.group(1)).as("%s: #include %s%s (a system header: NVRTC may not find it)", file,
                        m.group(1), m.group(2)).isEqualTo("\"");
                assertThat(program.headers()).as("%s includes \"%s\"", file, m.group(2)).containsKey(m.group(2));
            }
            assertThat(includes).as("%s includes common.cuh", file).isEqualTo(1);
            for (var header : program.headers().entrySet()) {
                assertThat(INCLUDE.matcher(stripComments(header.getValue())).find()).as("%s includes nothing",
                        header.getKey()).isFalse();
            }
        }
    }

    @Test
    void noKernelFileDefinesAgainWhatTheHeaderDefines() throws IOException {
        Set<String> shared = definitions(CudaKernels.program("elementwise").headers().get("common.cuh"));
        assertThat(shared).contains("bf16_t", "f32_to_bf16", "bf16_to_f32", "ld", "st", "warp_sum", "block_sum",
                "block_sum_d", "bf16_pack8", "GRID_STRIDE", "FULL_MASK", "NEG_INF", "FSDP4J_KERNEL_COMMON");
        for (String file : kernelFiles()) {
            Set<String> own = definitions(CudaKernels.program(file).source());
            own.retainAll(shared);
            assertThat(own).as("%s.cu defines what common.cuh defines (paste no preamble: include it)", file).isEmpty();
        }
    }

    @Test
    void theIncludeComesBeforeTheFirstUseOfTheHeadersNames() throws IOException {
        Set<String> shared = definitions(CudaKernels.program("elementwise").headers().get("common.cuh"));
        shared.remove("FSDP4J_KERNEL_COMMON");
        for (String file : kernelFiles()) {
            String code = stripComments(CudaKernels.program(file).source());
            Matcher include = INCLUDE.matcher(code);
            assertThat(include.find()).as(file).isTrue();
            for (String name : shared) {
                Matcher use = Pattern.compile("\\b" + name + "\\b").matcher(code);
                if (use.find()) {
                    assertThat(use.start()).as("%s.cu uses %s before its #include", file, name)
                            .isGreaterThan(include.start());
                }
            }
        }
    }

    @Test
    void theTranslationUnitNvrtcPreprocessesHasBalancedBrackets() throws IOException {
        for (String file : kernelFiles()) {
            Nvrtc.Program program = CudaKernels.program(file);
            String unit = stripComments(splice(program));
            assertThat(unit).as(file).doesNotContain("#include").contains("#define FSDP4J_KERNEL_COMMON");
            assertThat(unbalanced(unit)).as("%s.cu with its headers", file).isNull();
        }
        // the check itself catches a missing brace
        assertThat(unbalanced("__device__ void f() { if (x) { y(); }")).isNotNull();
    }

    /** The program's source with each {@code #include "name"} replaced by that header's text, as NVRTC reads it. */
    static String splice(Nvrtc.Program program) {
        Matcher m = INCLUDE.matcher(program.source());
        var out = new StringBuilder();
        while (m.find()) {
            String header = program.headers().get(m.group(2));
            assertThat(header).as("%s: #include \"%s\"", program.name(), m.group(2)).isNotNull();
            m.appendReplacement(out, Matcher.quoteReplacement(header));
        }
        m.appendTail(out);
        return out.toString();
    }

    /** Names defined at the start of a line: macros, typedefs and {@code __device__} functions. */
    private static Set<String> definitions(String code) {
        var names = new LinkedHashSet<String>();
        Matcher m = DEFINITION.matcher(stripComments(code));
        while (m.find()) {
            for (int g = 1; g <= 3; g++) {
                if (m.group(g) != null) {
                    names.add(m.group(g));
                }
            }
        }
        return names;
    }

    /** The first unbalanced bracket and its offset, or null. Comments must be stripped first. */
    private static String unbalanced(String code) {
        var open = new ArrayDeque<int[]>();
        boolean inString = false, inChar = false;
        for (int i = 0; i < code.length(); i++) {
            char c = code.charAt(i);
            if (inString || inChar) {
                if (c == '\\') {
                    i++;
                } else if ((inString && c == '"') || (inChar && c == '\'')) {
                    inString = inChar = false;
                }
                continue;
            }
            switch (c) {
                case '"' -> inString = true;
                case '\'' -> inChar = true;
                case '(', '[', '{' -> open.push(new int[] {c, i});
                case ')', ']', '}' -> {
                    char want = c == ')' ? '(' : c == ']' ? '[' : '{';
                    if (open.isEmpty() || open.peek()[0] != want) {
                        return "'" + c + "' at offset " + i;
                    }
                    open.pop();
                }
                default -> { }
            }
        }
        return open.isEmpty() ? null : "'" + (char) open.peek()[0] + "' at offset " + open.peek()[1] + " never closed";
    }

    /** Removes comments, keeping line breaks (and string literals as they are). */
    private static String stripComments(String code) {
        var out = new StringBuilder(code.length());
        for (int i = 0; i < code.length(); i++) {
            char c = code.charAt(i);
            if (c == '"') {
                int end = i + 1;
                while (end < code.length() && code.charAt(end) != '"' && code.charAt(end) != '\n') {
                    end += code.charAt(end) == '\\' ? 2 : 1;
                }
                out.append(code, i, Math.min(end + 1, code.length()));
                i = end;
            } else if (code.startsWith("//", i)) {
                while (i < code.length() && code.charAt(i) != '\n') {
                    i++;
                }
                out.append('\n');
            } else if (code.startsWith("/*", i)) {
                int end = code.indexOf("*/", i + 2);
                end = end < 0 ? code.length() : end + 2;
                code.substring(i, end).chars().filter(ch -> ch == '\n').forEach(ch -> out.append('\n'));
                i = end - 1;
            } else {
                out.append(c);
            }
        }
        return out.toString();
    }
}
