package io.fsdp4j.cli;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import picocli.CommandLine;
import org.junit.jupiter.api.Test;

/**
 * Every command's help is laid out alike, by picocli: the usage, the description once (the header is the command's
 * line in 'fsdp4j --help' only), paragraphs that picocli wraps (no line broken by hand in the middle of a
 * sentence), and option labels in capitals.
 */
class HelpTextsTest {
    @Test
    void everyCommandsHelpSaysItsDescriptionOnceInParagraphsWithCapitalLabels() {
        var out = new ByteArrayOutputStream();
        CommandLine root = Main.commandLine(new PrintStream(out, true, StandardCharsets.UTF_8), System.err, false);
        for (var entry : root.getSubcommands().entrySet()) {
            String name = entry.getKey();
            CommandLine command = entry.getValue();
            String help = command.getUsageMessage(CommandLine.Help.Ansi.OFF);
            var spec = command.getCommandSpec().usageMessage();
            assertThat(help).as("%s --help", name).startsWith("Usage: fsdp4j " + name);
            String[] description = spec.description();
            assertThat(description).as("%s's description", name).isNotEmpty();
            for (String paragraph : description) {
                assertThat(paragraph.strip()).as("%s: a paragraph, not a line broken by hand", name)
                        .matches("(?s).*[.:)]$");
            }
            String firstWords = description[0].substring(0, Math.min(40, description[0].length()));
            assertThat(help.split(java.util.regex.Pattern.quote(firstWords), -1)).as("%s says '%s' once", name,
                    firstWords).hasSize(2);
            for (String header : spec.header()) {
                if (!description[0].startsWith(header)) {
                    assertThat(help).as("%s --help repeats its header", name).doesNotContain(header);
                }
            }
            assertThat(help).as("%s: option labels in capitals", name).doesNotContainPattern("=<[a-z]");
        }
    }
}
