package io.fsdp4j.cli;

import java.io.IOException;
import java.io.InputStream;
import java.util.Properties;
import picocli.CommandLine.IVersionProvider;

/** {@code --version}: fsdp4j's version (from the jar's Maven metadata) and the Java runtime it runs on. */
final class VersionProvider implements IVersionProvider {
    private static final String POM_PROPERTIES = "/META-INF/maven/io.fsdp4j/fsdp4j/pom.properties";

    @Override
    public String[] getVersion() {
        return new String[] {
            "fsdp4j " + version(),
            "Java " + Runtime.version() + " (" + System.getProperty("java.vendor", "unknown vendor") + ", "
                    + System.getProperty("os.name") + " " + System.getProperty("os.arch") + ")",
        };
    }

    static String version() {
        try (InputStream in = VersionProvider.class.getResourceAsStream(POM_PROPERTIES)) {
            if (in != null) {
                var props = new Properties();
                props.load(in);
                String v = props.getProperty("version");
                if (v != null && !v.isBlank()) {
                    return v;
                }
            }
        } catch (IOException e) {
            // falls through: an unreadable resource is the same as none
        }
        String v = VersionProvider.class.getPackage().getImplementationVersion();
        return v != null ? v : "(development build)";
    }
}
