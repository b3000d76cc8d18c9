package io.fsdp4j.hf;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.fsdp4j.UserError;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.ConnectException;
import java.net.URI;
import java.net.URLEncoder;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.net.http.HttpTimeoutException;
import java.nio.channels.FileChannel;
import java.nio.channels.FileLock;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.nio.file.StandardOpenOption;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.LinkedHashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.function.Consumer;

/**
 * Downloads a model's files from the Hub into the {@link HubCache}, as huggingface_hub's {@code snapshot_download}
 * does: the revision is resolved to its commit by {@code GET {endpoint}/api/models/{repo}/revision/{rev}?blobs=true}
 * (its {@code sha} and {@code siblings}, each with its size, git blob id and, for LFS files, sha256), then each file
 * the model needs that the snapshot lacks is fetched from {@code {endpoint}/{repo}/resolve/{commit}/{file}} into
 * {@code blobs/{etag}.incomplete}, resumed from its length with a Range request, checked against the size and hash
 * listed, renamed to {@code blobs/{etag}} and linked from the snapshot. A file already in the snapshot is not fetched.
 *
 * <p>Files fetched: config.json, the tokenizer's files, generation_config.json, the chat template, and the safetensors
 * weights transformers loads (model.safetensors, or model.safetensors.index.json and the shards it names); not
 * other formats or copies of the weights. The token ({@code HF_TOKEN}, else the file {@code HF_HOME/token}) is sent
 * to the endpoint's host only, never to the host a download is redirected to.
 */
public final class HubDownload {
    private static final ObjectMapper JSON = new ObjectMapper();
    private static final List<String> MODEL_FILES = List.of("config.json", "generation_config.json", "tokenizer.json",
            "tokenizer_config.json", "special_tokens_map.json", "vocab.json", "merges.txt", "tokenizer.model",
            "added_tokens.json", "chat_template.jinja", "chat_template.json");
    private static final String SINGLE = "model.safetensors", INDEX = "model.safetensors.index.json";
    private static final int MAX_REDIRECTS = 5;

    private final HubCache cache;
    private final URI endpoint;
    private final String token;
    private final Consumer<String> progress;
    private final HttpClient http;

    /**
     * @param endpoint the Hub's base URL ({@code HF_ENDPOINT}, else https://huggingface.co)
     * @param token    the access token, or null
     * @param progress told one line as each file starts and every tenth of a large one
     */
    public HubDownload(HubCache cache, URI endpoint, String token, Consumer<String> progress) {
        this.cache = cache;
        this.endpoint = URI.create(endpoint.toString().replaceAll("/+$", ""));
        this.token = token;
        this.progress = progress;
        this.http = HttpClient.newBuilder().followRedirects(HttpClient.Redirect.NEVER)
                .connectTimeout(Duration.ofSeconds(20)).build();
    }

    /** The Hub could not be reached at all (as opposed to answering no): the cache may still serve. */
    public static final class Unreachable extends Exception {
        Unreachable(String message) {
            super(message);
        }
    }

    /** A file of the repository as the Hub lists it. */
    record Sibling(String name, long size, String etag, boolean lfs) {}

    /**
     * Resolves {@code id} on the Hub and makes its snapshot complete in the cache; returns it.
     *
     * @throws Unreachable when no answer came from the endpoint
     * @throws UserError   for a repository or revision the Hub does not have, or a download that failed its checks
     */
    public HubCache.Snapshot fetch(HubId id) throws Unreachable {
        JsonNode info = revisionInfo(id);
        String commit = info.path("sha").asText("");
        if (!HubId.isCommit(commit)) {
            throw new UserError(endpoint + " answered no commit hash for " + id + " (sha '" + commit + "')");
        }
        Map<String, Sibling> siblings = new LinkedHashMap<>();
        for (JsonNode s : info.path("siblings")) {
            String name = s.path("rfilename").asText();
            JsonNode lfs = s.get("lfs");
            boolean isLfs = lfs != null && lfs.isObject();
            long size = isLfs ? lfs.path("size").asLong(-1) : s.path("size").asLong(-1);
            String etag = isLfs ? lfs.path("sha256").asText("") : s.path("blobId").asText("");
            siblings.put(name, new Sibling(name, size, etag, isLfs));
        }
        if (!siblings.containsKey("config.json")) {
            throw new UserError(id + " has no config.json on " + endpoint + " (not a transformers model)");
        }
        List<String> wanted = new ArrayList<>();
        for (String name : MODEL_FILES) {
            if (siblings.containsKey(name)) {
                wanted.add(name);
            }
        }
        try {
            for (String name : wanted) {
                ensure(id, commit, siblings.get(name));
            }
            if (siblings.containsKey(SINGLE)) {
                ensure(id, commit, siblings.get(SINGLE));
            } else if (siblings.containsKey(INDEX)) {
                ensure(id, commit, siblings.get(INDEX));
                for (String shard : shardsOf(cache.snapshotDir(id, commit).resolve(INDEX))) {
                    Sibling s = siblings.get(shard);
                    if (s == null) {
                        throw new UserError(id + ": " + INDEX + " names " + shard + ", which the Hub does not list");
                    }
                    ensure(id, commit, s);
                }
            } else {
                throw new UserError(id + " has no safetensors weights on " + endpoint + " (neither " + SINGLE + " nor "
                        + INDEX + "); fsdp4j reads safetensors only");
            }
            cache.writeRef(id, commit);
        } catch (IOException e) {
            throw new UserError("cannot write the Hugging Face cache " + cache.root() + ": " + e.getMessage());
        }
        return new HubCache.Snapshot(commit, cache.snapshotDir(id, commit));
    }

    private JsonNode revisionInfo(HubId id) throws Unreachable {
        URI uri = URI.create(endpoint + "/api/models/" + id.repo() + "/revision/"
                + URLEncoder.encode(id.revision(), StandardCharsets.UTF_8) + "?blobs=true");
        HttpResponse<byte[]> response;
        try {
            response = http.send(request(uri).GET().build(), HttpResponse.BodyHandlers.ofByteArray());
        } catch (ConnectException | HttpTimeoutException e) {
            throw new Unreachable("cannot reach " + endpoint + " (" + e.getClass().getSimpleName() + ")");
        } catch (IOException e) {
            throw new Unreachable("cannot reach " + endpoint + " (" + e.getMessage() + ")");
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new UserError("interrupted while asking " + endpoint + " about " + id);
        }
        int status = response.statusCode();
        String code = response.headers().firstValue("X-Error-Code").orElse("");
        if (status == 404 && code.equals("RevisionNotFound")) {
            throw new UserError("revision '" + id.revision() + "' does not exist in " + id.repo() + " on " + endpoint
                    + "; give a branch, tag or commit of it (" + id.repo() + "@main)");
        }
        if (status == 401 || status == 403 || status == 404) {
            throw new UserError(id.repo() + " is not on " + endpoint + " or needs access (HTTP " + status
                    + (code.isEmpty() ? "" : ", " + code) + "); check the id, and for a gated or private model set"
                    + " HF_TOKEN to a token that may read it");
        }
        if (status != 200) {
            throw new UserError(endpoint + " answered HTTP " + status + " for " + id + "; try again later");
        }
        try {
            return JSON.readTree(response.body());
        } catch (IOException e) {
            throw new UserError(endpoint + " answered " + id + " with JSON that does not parse: " + e.getMessage());
        }
    }

    private HttpRequest.Builder request(URI uri) {
        HttpRequest.Builder b = HttpRequest.newBuilder(uri).timeout(Duration.ofMinutes(5))
                .header("User-Agent", "fsdp4j; hf_hub-compatible");
        if (token != null && sameHost(uri, endpoint)) {
            b.header("Authorization", "Bearer " + token);
        }
        return b;
    }

    private static boolean sameHost(URI a, URI b) {
        return String.valueOf(a.getHost()).equalsIgnoreCase(String.valueOf(b.getHost())) && a.getPort() == b.getPort();
    }

    private static Set<String> shardsOf(Path index) {
        try {
            JsonNode map = JSON.readTree(index.toFile()).get("weight_map");
            if (map == null || !map.isObject()) {
                throw new UserError(index + " has no weight_map");
            }
            Set<String> files = new LinkedHashSet<>();
            map.properties().forEach(e -> files.add(e.getValue().asText()));
            return files;
        } catch (IOException e) {
            throw new UserError(index + " is not valid JSON: " + e.getMessage());
        }
    }

    /** Makes {@code snapshots/{commit}/{file}} present: linked to its blob, downloaded first if the blob is not there. */
    private void ensure(HubId id, String commit, Sibling s) throws IOException {
        if (s.size() < 0 || s.etag().isEmpty() || s.name().contains("/") || s.name().contains("\\")) {
            throw new UserError(endpoint + " lists " + id.repo() + "/" + s.name() + " without its size and hash (or"
                    + " under a folder); cannot check a download of it");
        }
        if (cache.has(id, commit, s.name(), s.size())) {
            return;
        }
        Path blob = cache.blob(id, s.etag());
        if (!Files.isRegularFile(blob) || Files.size(blob) != s.size()) {
            Path lockFile = cache.lock(id, s.etag());
            Files.createDirectories(lockFile.getParent());
            Files.createDirectories(blob.getParent());
            try (FileChannel lockChannel = FileChannel.open(lockFile, StandardOpenOption.CREATE, StandardOpenOption.WRITE);
                 FileLock ignored = lockChannel.lock()) { // another process may be fetching the same blob
                if (!Files.isRegularFile(blob) || Files.size(blob) != s.size()) {
                    download(id, commit, s, blob);
                }
            }
        }
        cache.link(id, commit, s.name(), s.etag());
    }

    private void download(HubId id, String commit, Sibling s, Path blob) throws IOException {
        Path partial = cache.incomplete(id, s.etag());
        long have = Files.isRegularFile(partial) ? Files.size(partial) : 0;
        if (have > s.size()) {
            Files.delete(partial);
            have = 0;
        }
        String what = id.repo() + "/" + s.name();
        progress.accept("downloading " + what + " (" + bytes(s.size()) + (have > 0 ? ", resuming at " + bytes(have) : "")
                + ")");
        if (have < s.size()) {
            fetchInto(id, commit, s, partial, have);
        }
        long got = Files.size(partial);
        if (got != s.size()) {
            throw new UserError("download of " + what + " stopped at " + got + " of " + s.size() + " bytes (kept as "
                    + partial + "); run again to resume");
        }
        String actual = s.lfs() ? digest(partial, "SHA-256", null) : digest(partial, "SHA-1", "blob " + got + "\0");
        if (!actual.equals(s.etag())) {
            Files.delete(partial);
            throw new UserError("download of " + what + " has " + (s.lfs() ? "sha256 " : "git blob id ") + actual
                    + " but the Hub lists " + s.etag() + "; the download was removed, run again");
        }
        Files.move(partial, blob, StandardCopyOption.ATOMIC_MOVE);
    }

    /** Appends bytes [have, size) of the file to {@code partial}, following redirects. */
    private void fetchInto(HubId id, String commit, Sibling s, Path partial, long have) throws IOException {
        String what = id.repo() + "/" + s.name();
        URI uri = URI.create(endpoint + "/" + id.repo() + "/resolve/" + commit + "/"
                + URLEncoder.encode(s.name(), StandardCharsets.UTF_8).replace("+", "%20"));
        HttpResponse<InputStream> response = null;
        for (int hop = 0; ; hop++) {
            HttpRequest.Builder b = request(uri).GET();
            if (have > 0) {
                b.header("Range", "bytes=" + have + "-");
            }
            try {
                response = http.send(b.build(), HttpResponse.BodyHandlers.ofInputStream());
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                throw new UserError("interrupted while downloading " + what + " (kept as " + partial + ")");
            } catch (IOException e) {
                throw new UserError("cannot download " + what + " from " + uri.getHost() + ": " + e.getMessage()
                        + "; run again to resume");
            }
            if (hop == 0) {
                checkHeaders(response, commit, s, what);
            }
            int status = response.statusCode();
            if (status / 100 != 3) {
                break;
            }
            response.body().close();
            String location = response.headers().firstValue("Location").orElse(null);
            if (location == null || hop == MAX_REDIRECTS) {
                throw new UserError("download of " + what + ": too many redirects or one without a Location");
            }
            uri = uri.resolve(location);
        }
        int status = response.statusCode();
        boolean append = status == 206;
        if (status == 416 && have == s.size()) {
            response.body().close();
            return;
        }
        if (status != 200 && status != 206) {
            response.body().close();
            throw new UserError("download of " + what + " failed: HTTP " + status);
        }
        if (append) {
            String range = response.headers().firstValue("Content-Range").orElse("");
            if (!range.startsWith("bytes " + have + "-")) {
                response.body().close();
                throw new UserError("download of " + what + ": the server resumed at '" + range + "', not byte " + have);
            }
        }
        long done = append ? have : 0;
        long nextReport = done + s.size() / 10;
        try (InputStream in = response.body();
             OutputStream out = Files.newOutputStream(partial, StandardOpenOption.CREATE, StandardOpenOption.WRITE,
                     append ? StandardOpenOption.APPEND : StandardOpenOption.TRUNCATE_EXISTING)) {
            byte[] buffer = new byte[1 << 16];
            for (int n; (n = in.read(buffer)) > 0; ) {
                out.write(buffer, 0, n);
                done += n;
                if (done > s.size()) {
                    break; // more than listed: refused below
                }
                if (s.size() > (64 << 20) && done >= nextReport && done < s.size()) {
                    progress.accept(String.format("  %s: %d%% (%s of %s)", s.name(), done * 100 / s.size(), bytes(done),
                            bytes(s.size())));
                    nextReport = done + s.size() / 10;
                }
            }
        } catch (IOException e) {
            // the connection broke: what arrived stays in the .incomplete file for the next run to resume
        }
        if (done > s.size()) {
            Files.delete(partial);
            throw new UserError("download of " + what + " is longer than the " + s.size() + " bytes the Hub lists; the"
                    + " download was removed, run again");
        }
    }

    /** The first answer's commit and ETag must be those listed: the file is the one the revision named. */
    private static void checkHeaders(HttpResponse<?> response, String commit, Sibling s, String what) {
        var headers = response.headers();
        headers.firstValue("X-Repo-Commit").ifPresent(c -> {
            if (!c.equals(commit)) {
                throw new UserError("download of " + what + ": the Hub served commit " + c + ", not " + commit);
            }
        });
        String etag = headers.firstValue("X-Linked-Etag").or(() -> headers.firstValue("ETag")).orElse(null);
        if (etag != null && response.statusCode() / 100 != 4) {
            String normalized = etag.replaceFirst("^W/", "").replace("\"", "");
            if (!normalized.equals(s.etag())) {
                throw new UserError("download of " + what + ": the Hub's ETag " + normalized + " is not the "
                        + s.etag() + " it lists for the file");
            }
        }
    }

    private static String digest(Path file, String algorithm, String prefix) throws IOException {
        MessageDigest md;
        try {
            md = MessageDigest.getInstance(algorithm);
        } catch (NoSuchAlgorithmException e) {
            throw new IllegalStateException(e);
        }
        if (prefix != null) {
            md.update(prefix.getBytes(StandardCharsets.UTF_8));
        }
        try (InputStream in = Files.newInputStream(file)) {
            byte[] buffer = new byte[1 << 20];
            for (int n; (n = in.read(buffer)) > 0; ) {
                md.update(buffer, 0, n);
            }
        }
        return HexFormat.of().formatHex(md.digest());
    }

    static String bytes(long n) {
        if (n >= 1L << 30) {
            return String.format("%.1f GiB", n / (double) (1L << 30));
        }
        if (n >= 1L << 20) {
            return String.format("%.1f MiB", n / (double) (1L << 20));
        }
        return n + " bytes";
    }
}
