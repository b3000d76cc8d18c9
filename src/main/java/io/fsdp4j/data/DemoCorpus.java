package io.fsdp4j.data;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.net.URI;
import java.net.URISyntaxException;
import java.nio.file.FileSystem;
import java.nio.file.FileSystemNotFoundException;
import java.nio.file.FileSystems;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import java.util.stream.Stream;

/**
 * The built-in demo's training text: fsdp4j's own Java sources, bundled in the jar under {@code demo/sources}
 * at build time, so the demo's small model learns to write the code that trains it. Read in sorted path order,
 * so the corpus is the same on every machine.
 */
public final class DemoCorpus {
    private static final String ROOT = "demo/sources";

    private DemoCorpus() {}

    public static String text() {
        var url = DemoCorpus.class.getClassLoader().getResource(ROOT);
        if (url == null) {
            throw new IllegalStateException("the demo corpus '" + ROOT + "' is missing from the build");
        }
        try {
            URI uri = url.toURI();
            if (uri.getScheme().equals("jar")) {
                FileSystem fs;
                try {
                    fs = FileSystems.getFileSystem(uri);
                } catch (FileSystemNotFoundException e) {
                    fs = FileSystems.newFileSystem(uri, Map.of());
                }
                return readAll(fs.getPath(ROOT));
            }
            return readAll(Path.of(uri));
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        } catch (URISyntaxException e) {
            throw new IllegalStateException(e);
        }
    }

    private static String readAll(Path root) throws IOException {
        List<Path> files;
        try (Stream<Path> walk = Files.walk(root)) {
            files = walk.filter(Files::isRegularFile).sorted((a, b) -> a.toString().compareTo(b.toString())).toList();
        }
        StringBuilder text = new StringBuilder();
        for (Path f : files) {
            text.append(Files.readString(f)).append('\n');
        }
        return text.toString();
    }
}
