package io.fsdp4j.cli;

import picocli.CommandLine.IVersionProvider;

/** {@code --version}: fsdp4j's version (from the jar's Maven metadata) and the Java runtime it runs on. */
final class VersionProvider implements IVersionProvider {
    @Override
    public String[] getVersion() {
        return new String[] {
            "fsdp4j " + version(),
            "Java " + Runtime.version() + " (" + System.getProperty("java.vendor", "unknown vendor") + ", "
                    + System.getProperty("os.name") + " " + System.getProperty("os.arch") + ")",
        };
    }

    static String version() {
        return io.fsdp4j.Version.current();
    }
}
