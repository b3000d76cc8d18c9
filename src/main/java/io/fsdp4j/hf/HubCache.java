package io.fsdp4j.hf;

import io.fsdp4j.UserError;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.ThreadLocalRandom;

/**
 * The Hugging Face cache, laid out as huggingface_hub writes and reads it, so that a model downloaded by either is
 * used by the other:
 *
 * <pre>
 * {root}/models--{org}--{name}/
 *     refs/{branch or tag}            the commit hash it pointed to when last resolved
 *     blobs/{etag}                    file contents, named by sha256 (LFS files) or git blob sha1 (others)
 *     blobs/{etag}.incomplete         a download under way or stopped (resumed from its length)
 *     snapshots/{commit}/{file}       relative symlinks to ../../blobs/{etag}
 * {root}/.locks/models--{org}--{name}/{etag}.lock
 * </pre>
 *
 * The root is {@code HF_HUB_CACHE}, else {@code HF_HOME/hub}, else {@code $XDG_CACHE_HOME/huggingface/hub}, else
 * {@code ~/.cache/huggingface/hub}.
 */
public final class HubCache {
    private final Path root;

    public HubCache(Path root) {
        this.root = root;
    }

    /** The cache the environment names, as huggingface_hub finds it. */
    public static HubCache fromEnvironment(Map<String, String> env) {
        return new HubCache(rootFrom(env));
    }

    static Path rootFrom(Map<String, String> env) {
        if (nonEmpty(env.get("HF_HUB_CACHE"))) {
            return Path.of(env.get("HF_HUB_CACHE"));
        }
        if (nonEmpty(env.get("HUGGINGFACE_HUB_CACHE"))) { // huggingface_hub's older name, still read
            return Path.of(env.get("HUGGINGFACE_HUB_CACHE"));
        }
        return home(env).resolve("hub");
    }

    /** {@code HF_HOME}, else {@code $XDG_CACHE_HOME/huggingface}, else {@code ~/.cache/huggingface}. */
    static Path home(Map<String, String> env) {
        if (nonEmpty(env.get("HF_HOME"))) {
            return Path.of(env.get("HF_HOME"));
        }
        Path cache = nonEmpty(env.get("XDG_CACHE_HOME")) ? Path.of(env.get("XDG_CACHE_HOME"))
                : Path.of(System.getProperty("user.home"), ".cache");
        return cache.resolve("huggingface");
    }

    private static boolean nonEmpty(String s) {
        return s != null && !s.isBlank();
    }

    public Path root() {
        return root;
    }

    public Path repoDir(HubId id) {
        return root.resolve(id.folderName());
    }

    /** A revision resolved to its commit and the snapshot folder of that commit. */
    public record Snapshot(String commit, Path dir) {}

    /**
     * The snapshot {@code id} names in the cache, without asking the Hub: its commit hash's folder, or the folder of
     * the commit {@code refs/{revision}} holds. Empty when the revision was never resolved here or its snapshot has
     * no config.json.
     */
    public Optional<Snapshot> find(HubId id) {
        Path repo = repoDir(id);
        String commit = id.revision();
        if (!id.isCommit()) {
            Path ref = repo.resolve("refs").resolve(id.revision()).normalize();
            if (!ref.startsWith(repo.resolve("refs")) || !Files.isRegularFile(ref)) {
                return Optional.empty();
            }
            try {
                commit = Files.readString(ref, StandardCharsets.UTF_8).strip();
            } catch (IOException e) {
                throw new UserError("cannot read " + ref + ": " + e.getMessage());
            }
            if (!HubId.isCommit(commit)) {
                throw new UserError(ref + " holds '" + commit + "', not a commit hash; remove it and resolve "
                        + id.repo() + " again");
            }
        }
        Path dir = snapshotDir(id, commit);
        return Files.isRegularFile(dir.resolve("config.json")) ? Optional.of(new Snapshot(commit, dir)) : Optional.empty();
    }

    Path snapshotDir(HubId id, String commit) {
        return repoDir(id).resolve("snapshots").resolve(commit);
    }

    Path blob(HubId id, String etag) {
        return repoDir(id).resolve("blobs").resolve(etag);
    }

    Path incomplete(HubId id, String etag) {
        return repoDir(id).resolve("blobs").resolve(etag + ".incomplete");
    }

    Path lock(HubId id, String etag) {
        return root.resolve(".locks").resolve(id.folderName()).resolve(etag + ".lock");
    }

    /** Whether {@code file} of the snapshot is there: its link leads to a blob of {@code size} bytes. */
    boolean has(HubId id, String commit, String file, long size) {
        Path p = snapshotDir(id, commit).resolve(file);
        try {
            return Files.isRegularFile(p) && Files.size(p) == size;
        } catch (IOException e) {
            return false;
        }
    }

    /** Links {@code snapshots/{commit}/{file}} to its blob with a relative link, replacing one there. */
    void link(HubId id, String commit, String file, String etag) throws IOException {
        Path link = snapshotDir(id, commit).resolve(file);
        Files.createDirectories(link.getParent());
        Path target = link.getParent().relativize(blob(id, etag));
        Path tmp = link.resolveSibling(link.getFileName() + "." + Long.toHexString(ThreadLocalRandom.current().nextLong())
                + ".tmp");
        Files.createSymbolicLink(tmp, target);
        Files.move(tmp, link, StandardCopyOption.ATOMIC_MOVE, StandardCopyOption.REPLACE_EXISTING);
    }

    /** Records that {@code revision} (a branch or tag) resolved to {@code commit}: {@code refs/{revision}}. */
    void writeRef(HubId id, String commit) throws IOException {
        if (id.isCommit()) {
            return;
        }
        Path ref = repoDir(id).resolve("refs").resolve(id.revision());
        Files.createDirectories(ref.getParent());
        if (Files.isRegularFile(ref) && Files.readString(ref, StandardCharsets.UTF_8).equals(commit)) {
            return;
        }
        Path tmp = ref.resolveSibling(ref.getFileName() + "." + Long.toHexString(ThreadLocalRandom.current().nextLong())
                + ".tmp");
        Files.writeString(tmp, commit, StandardCharsets.UTF_8);
        Files.move(tmp, ref, StandardCopyOption.ATOMIC_MOVE, StandardCopyOption.REPLACE_EXISTING);
    }
}
