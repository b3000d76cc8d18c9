package io.fsdp4j;

import java.io.IOException;
import java.io.InputStream;
import java.util.Properties;

/** fsdp4j's own version: from the jar's Maven metadata, else the package's, else "(development build)". */
public final class Version {
    private static final String POM_PROPERTIES = "/META-INF/maven/io.fsdp4j/fsdp4j/pom.properties";

    private Version() {}

    public static String current() {
        try (InputStream in = Version.class.getResourceAsStream(POM_PROPERTIES)) {
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
        String v = Version.class.getPackage().getImplementationVersion();
        return v != null ? v : "(development build)";
    }
}
