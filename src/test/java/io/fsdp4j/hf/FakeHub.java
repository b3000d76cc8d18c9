package io.fsdp4j.hf;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import com.sun.net.httpserver.HttpExchange;
import com.sun.net.httpserver.HttpServer;
import java.io.IOException;
import java.io.OutputStream;
import java.net.InetSocketAddress;
import java.net.URI;
import java.net.URLDecoder;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.util.HexFormat;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * A local HTTP server that answers as the Hugging Face Hub's endpoints do, for download tests:
 * {@code GET /api/models/{repo}/revision/{rev}} the commit's {@code sha} and {@code siblings} (size, git blob id, and
 * for LFS files {@code lfs.sha256}); {@code GET /{repo}/resolve/{rev}/{file}} a regular file directly with its git blob
 * id as ETag, an LFS file as a 302 to another host name of this server ({@code 127.0.0.1} for {@code localhost}) with
 * X-Linked-Etag (its sha256) and X-Linked-Size; X-Repo-Commit on both; byte ranges ({@code Range: bytes=N-}) answered
 * with 206. Unknown repositories get 401 RepositoryNotFound, unknown revisions 404 RevisionNotFound. Faults on request:
 * the next body of a file cut after some bytes, or served with other bytes of the same length.
 */
final class FakeHub implements AutoCloseable {
    private static final ObjectMapper JSON = new ObjectMapper();
    private static final Pattern API = Pattern.compile("/api/models/([^/]+/[^/]+)/revision/([^/?]+)");
    private static final Pattern RESOLVE = Pattern.compile("/([^/]+/[^/]+)/resolve/([^/]+)/(.+)");
    private static final Pattern CDN = Pattern.compile("/cdn/([0-9a-f]{64})");

    record File(String name, byte[] content, boolean lfs) {
        String etag() {
            return lfs ? sha256(content) : gitBlobId(content);
        }
    }

    /** One request: method, path with query, and its Authorization and Range headers (null when absent). */
    record Request(String method, String path, String authorization, String range) {}

    private final HttpServer server;
    private final Map<String, Map<String, String>> refs = new ConcurrentHashMap<>(); // repo -> branch -> commit
    private final Map<String, Map<String, File>> commits = new ConcurrentHashMap<>(); // commit -> files
    private final Map<String, byte[]> lfsBlobs = new ConcurrentHashMap<>();
    final List<Request> requests = new CopyOnWriteArrayList<>();
    private final Map<String, Integer> cutAfter = new ConcurrentHashMap<>();
    private final Map<String, Boolean> corrupt = new ConcurrentHashMap<>();

    FakeHub() throws IOException {
        server = HttpServer.create(new InetSocketAddress("127.0.0.1", 0), 0);
        server.createContext("/", this::handle);
        server.start();
    }

    /** The endpoint, named {@code localhost} so that the CDN's {@code 127.0.0.1} is another host. */
    URI endpoint() {
        return URI.create("http://localhost:" + server.getAddress().getPort());
    }

    /** Publishes {@code files} as {@code commit} of {@code repo}, which {@code branch} then points to. */
    void publish(String repo, String branch, String commit, List<File> files) {
        Map<String, File> byName = new java.util.LinkedHashMap<>();
        for (File f : files) {
            byName.put(f.name(), f);
            if (f.lfs()) {
                lfsBlobs.put(f.etag(), f.content());
            }
        }
        commits.put(commit, byName);
        refs.computeIfAbsent(repo, r -> new ConcurrentHashMap<>()).put(branch, commit);
    }

    /** The next download of {@code file} sends its full length in Content-Length but stops after {@code bytes}. */
    void cutNextDownload(String file, int bytes) {
        cutAfter.put(file, bytes);
    }

    /** Downloads of {@code file} serve other bytes of the same length. */
    void corrupt(String file) {
        corrupt.put(file, true);
    }

    /** Requests for file contents (resolve or CDN), not API calls. */
    List<Request> downloads() {
        return requests.stream().filter(r -> !r.path().startsWith("/api/")).toList();
    }

    private String commitOf(String repo, String rev) {
        Map<String, String> branches = refs.get(repo);
        if (branches == null) {
            return null;
        }
        if (branches.containsKey(rev)) {
            return branches.get(rev);
        }
        return branches.containsValue(rev) ? rev : null;
    }

    private void handle(HttpExchange ex) throws IOException {
        String path = ex.getRequestURI().getRawPath();
        String query = ex.getRequestURI().getRawQuery();
        requests.add(new Request(ex.getRequestMethod(), path + (query == null ? "" : "?" + query),
                ex.getRequestHeaders().getFirst("Authorization"), ex.getRequestHeaders().getFirst("Range")));
        try (ex) {
            Matcher m;
            if ((m = API.matcher(path)).matches()) {
                api(ex, m.group(1), URLDecoder.decode(m.group(2), StandardCharsets.UTF_8));
            } else if ((m = RESOLVE.matcher(path)).matches()) {
                resolve(ex, m.group(1), URLDecoder.decode(m.group(2), StandardCharsets.UTF_8),
                        URLDecoder.decode(m.group(3), StandardCharsets.UTF_8));
            } else if ((m = CDN.matcher(path)).matches() && lfsBlobs.containsKey(m.group(1))) {
                String name = ex.getRequestURI().getRawQuery() == null ? "" : ex.getRequestURI().getRawQuery();
                body(ex, lfsBlobs.get(m.group(1)), URLDecoder.decode(name, StandardCharsets.UTF_8));
            } else {
                error(ex, 404, "EntryNotFound");
            }
        }
    }

    private void api(HttpExchange ex, String repo, String rev) throws IOException {
        if (!refs.containsKey(repo)) {
            error(ex, 401, "RepositoryNotFound");
            return;
        }
        String commit = commitOf(repo, rev);
        if (commit == null) {
            error(ex, 404, "RevisionNotFound");
            return;
        }
        ObjectNode info = JSON.createObjectNode().put("id", repo).put("sha", commit);
        ArrayNode siblings = info.putArray("siblings");
        for (File f : commits.get(commit).values()) {
            ObjectNode s = siblings.addObject().put("rfilename", f.name()).put("size", f.content().length)
                    .put("blobId", gitBlobId(f.content()));
            if (f.lfs()) {
                s.putObject("lfs").put("sha256", f.etag()).put("size", f.content().length).put("pointerSize", 134);
            }
        }
        byte[] body = JSON.writeValueAsBytes(info);
        ex.getResponseHeaders().set("Content-Type", "application/json");
        ex.sendResponseHeaders(200, body.length);
        ex.getResponseBody().write(body);
    }

    private void resolve(HttpExchange ex, String repo, String rev, String name) throws IOException {
        String commit = commitOf(repo, rev);
        File f = commit == null ? null : commits.get(commit).get(name);
        if (f == null) {
            error(ex, 404, commit == null ? "RevisionNotFound" : "EntryNotFound");
            return;
        }
        ex.getResponseHeaders().set("X-Repo-Commit", commit);
        if (f.lfs()) {
            ex.getResponseHeaders().set("X-Linked-Etag", "\"" + f.etag() + "\"");
            ex.getResponseHeaders().set("X-Linked-Size", Integer.toString(f.content().length));
            ex.getResponseHeaders().set("ETag", "\"" + gitBlobId(("pointer " + f.etag()).getBytes()) + "\"");
            ex.getResponseHeaders().set("Location", "http://127.0.0.1:" + server.getAddress().getPort() + "/cdn/"
                    + f.etag() + "?" + name);
            ex.sendResponseHeaders(302, -1);
            return;
        }
        ex.getResponseHeaders().set("ETag", "\"" + f.etag() + "\"");
        body(ex, f.content(), name);
    }

    /** The file's bytes, or the range asked for, with the faults set for it. */
    private void body(HttpExchange ex, byte[] content, String name) throws IOException {
        if (Boolean.TRUE.equals(corrupt.get(name))) {
            content = content.clone();
            content[content.length / 2] ^= 0x5a;
        }
        int from = 0;
        String range = ex.getRequestHeaders().getFirst("Range");
        if (range != null && range.matches("bytes=\\d+-")) {
            from = Integer.parseInt(range.substring(6, range.length() - 1));
            if (from >= content.length) {
                ex.getResponseHeaders().set("Content-Range", "bytes */" + content.length);
                ex.sendResponseHeaders(416, -1);
                return;
            }
            ex.getResponseHeaders().set("Content-Range", "bytes " + from + "-" + (content.length - 1) + "/"
                    + content.length);
        }
        int length = content.length - from;
        ex.sendResponseHeaders(range != null ? 206 : 200, length);
        Integer cut = cutAfter.remove(name);
        OutputStream out = ex.getResponseBody();
        out.write(content, from, cut == null ? length : Math.min(cut, length));
        out.flush(); // with a cut, the exchange closes short of its Content-Length and the client sees the connection end
    }

    private static void error(HttpExchange ex, int status, String code) throws IOException {
        byte[] body = ("{\"error\":\"" + code + "\"}").getBytes(StandardCharsets.UTF_8);
        ex.getResponseHeaders().set("X-Error-Code", code);
        ex.sendResponseHeaders(status, body.length);
        ex.getResponseBody().write(body);
    }

    static String sha256(byte[] content) {
        return hex("SHA-256", new byte[0], content);
    }

    /** Git's blob id: sha1 of "blob {length}\0" and the content (the Hub's ETag of a regular file). */
    static String gitBlobId(byte[] content) {
        return hex("SHA-1", ("blob " + content.length + "\0").getBytes(StandardCharsets.UTF_8), content);
    }

    private static String hex(String algorithm, byte[] prefix, byte[] content) {
        try {
            MessageDigest md = MessageDigest.getInstance(algorithm);
            md.update(prefix);
            return HexFormat.of().formatHex(md.digest(content));
        } catch (java.security.NoSuchAlgorithmException e) {
            throw new IllegalStateException(e);
        }
    }

    @Override
    public void close() {
        server.stop(0);
    }
}
