package io.fsdp4j.hf;

import io.fsdp4j.UserError;
import java.io.IOException;
import java.net.URI;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Locale;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.function.Consumer;

/**
 * Where a model the user names is: {@code model.path}, {@code score --model}, {@code eval --model} take a directory or
 * a Hub id {@code org/name[@revision]}; this turns either into a local directory. A directory that exists is used as
 * it is. An id is resolved in the Hugging Face cache ({@link HubCache}) and, unless {@code HF_HUB_OFFLINE} is set,
 * against the Hub ({@code HF_ENDPOINT}, with {@code HF_TOKEN}): the revision's current commit is asked for and the
 * files its snapshot lacks are downloaded ({@link HubDownload}); a complete snapshot is used without a download.
 * When the Hub cannot be reached, the revision cached last is used, as huggingface_hub does.
 *
 * <p>Every node of a multi-node job resolves the id itself; a branch that moves between two nodes' resolutions
 * gives them different weights, which the preflight's weight fingerprints ({@code preflight.NodeFacts}) refuse.
 * Pinning {@code @commit} avoids it.
 */
public final class ModelLocation {
    private static final Set<String> TRUE = Set.of("1", "ON", "YES", "TRUE");
    public static final String DEFAULT_ENDPOINT = "https://huggingface.co";

    private ModelLocation() {}

    /** Resolves with the process's environment, telling progress on standard error. */
    public static Path resolve(Path given, String what) {
        return resolve(given, what, System.getenv(), line -> System.err.println("fsdp4j: " + line));
    }

    /**
     * The directory {@code given} names.
     *
     * @param what     the key or option it came from, for messages ({@code model.path}, {@code --model})
     * @param env      the environment: HF_HUB_CACHE, HF_HOME, HF_HUB_OFFLINE, HF_ENDPOINT, HF_TOKEN
     * @param progress told one line per step of a download
     * @return a directory, or {@code given} unchanged when it is neither a directory nor an id (the caller then
     *         says what is missing there)
     */
    public static Path resolve(Path given, String what, Map<String, String> env, Consumer<String> progress) {
        if (Files.isDirectory(given)) {
            return given;
        }
        Optional<HubId> parsed = HubId.parse(given.toString());
        if (parsed.isEmpty()) {
            return given;
        }
        HubId id = parsed.get();
        HubCache cache = HubCache.fromEnvironment(env);
        Optional<HubCache.Snapshot> cached = cache.find(id);
        if (offline(env)) {
            return cached.map(HubCache.Snapshot::dir).orElseThrow(() -> new UserError(what + " " + given
                    + " is not a directory, and " + id + " is not in the Hugging Face cache " + cache.root()
                    + " (HF_HUB_OFFLINE is set, so nothing is downloaded); download it first or give a directory"));
        }
        if (cached.isPresent() && id.isCommit()) {
            return cached.get().dir(); // a commit's files never change
        }
        URI endpoint = URI.create(nonEmpty(env.get("HF_ENDPOINT")) ? env.get("HF_ENDPOINT") : DEFAULT_ENDPOINT);
        var download = new HubDownload(cache, endpoint, token(env), progress);
        try {
            HubCache.Snapshot snapshot = download.fetch(id);
            return snapshot.dir();
        } catch (UserError e) {
            throw new UserError(what + " " + given + " (not a directory, so a Hub id): " + e.getMessage());
        } catch (HubDownload.Unreachable e) {
            if (cached.isPresent()) {
                progress.accept(e.getMessage() + "; using " + id + " as cached (commit " + cached.get().commit() + ")");
                return cached.get().dir();
            }
            throw new UserError(what + " " + given + ": " + id + " is not in the Hugging Face cache " + cache.root()
                    + " and " + e.getMessage() + "; check the network or HF_ENDPOINT, or give a directory");
        }
    }

    static boolean offline(Map<String, String> env) {
        String v = env.get("HF_HUB_OFFLINE");
        if (!nonEmpty(v)) {
            v = env.get("TRANSFORMERS_OFFLINE");
        }
        return v != null && TRUE.contains(v.strip().toUpperCase(Locale.ROOT));
    }

    /** {@code HF_TOKEN}, else the token {@code hf auth login} saved in {@code HF_HOME/token}, else null. */
    static String token(Map<String, String> env) {
        if (nonEmpty(env.get("HF_TOKEN"))) {
            return env.get("HF_TOKEN").strip();
        }
        Path file = nonEmpty(env.get("HF_TOKEN_PATH")) ? Path.of(env.get("HF_TOKEN_PATH"))
                : HubCache.home(env).resolve("token");
        try {
            return Files.isRegularFile(file) ? Files.readString(file, StandardCharsets.UTF_8).strip() : null;
        } catch (IOException e) {
            return null;
        }
    }

    private static boolean nonEmpty(String s) {
        return s != null && !s.isBlank();
    }
}
