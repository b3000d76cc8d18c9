package io.fsdp4j.hf;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.fsdp4j.Golden;
import io.fsdp4j.UserError;
import io.fsdp4j.model.LlamaModel;
import io.fsdp4j.model.ModelConfig;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Hub ids as model paths: resolved in a cache laid out as huggingface_hub lays it out, downloaded from a local server
 * that answers as the Hub does, checked, resumed, and refused in one line when wrong.
 */
class ModelLocationTest {
    private static final String REPO = "acme/tiny-qwen2", COMMIT = "0123456789abcdef0123456789abcdef01234567",
            COMMIT2 = "fedcba9876543210fedcba9876543210fedcba98";

    @TempDir
    Path tmp;

    private FakeHub hub;
    private Path cacheRoot;
    private final List<String> progress = new ArrayList<>();

    @BeforeEach
    void start() throws IOException {
        hub = new FakeHub();
        cacheRoot = tmp.resolve("hf-home").resolve("hub");
        hub.publish(REPO, "main", COMMIT, qwen2Files());
    }

    @AfterEach
    void stop() {
        hub.close();
    }

    private static List<FakeHub.File> qwen2Files() throws IOException {
        Path dir = Golden.dir("qwen2");
        return List.of(
                new FakeHub.File("config.json", Files.readAllBytes(dir.resolve("config.json")), false),
                new FakeHub.File("model.safetensors", Files.readAllBytes(dir.resolve("model.safetensors")), true),
                new FakeHub.File("tokenizer_config.json", "{\"model_max_length\": 64}".getBytes(), false),
                new FakeHub.File("pytorch_model.bin", "not wanted".getBytes(), true),
                new FakeHub.File("README.md", "# tiny".getBytes(), false));
    }

    private Map<String, String> env(String... more) {
        Map<String, String> env = new HashMap<>(Map.of("HF_HOME", tmp.resolve("hf-home").toString(),
                "HF_ENDPOINT", hub.endpoint().toString()));
        for (int i = 0; i < more.length; i += 2) {
            env.put(more[i], more[i + 1]);
        }
        return env;
    }

    private Path resolve(String id, Map<String, String> env) {
        return ModelLocation.resolve(Path.of(id), "model.path", env, progress::add);
    }

    private Path repoDir() {
        return cacheRoot.resolve("models--acme--tiny-qwen2");
    }

    /** Every file under the repository's cache folder, relative, with "-> target" for links. */
    private List<String> cacheTree() throws IOException {
        try (Stream<Path> walk = Files.walk(repoDir())) {
            return walk.filter(p -> !Files.isDirectory(p, LinkOption.NOFOLLOW_LINKS)).map(p -> {
                String rel = repoDir().relativize(p).toString();
                try {
                    return Files.isSymbolicLink(p) ? rel + " -> " + Files.readSymbolicLink(p) : rel;
                } catch (IOException e) {
                    throw new java.io.UncheckedIOException(e);
                }
            }).sorted().toList();
        }
    }

    @Test
    void aHubIdIsDownloadedIntoTheCacheAsHuggingfaceHubLaysItOut() throws IOException {
        Path dir = resolve(REPO, env("HF_TOKEN", "hf_secret"));

        assertThat(dir).isEqualTo(repoDir().resolve("snapshots").resolve(COMMIT));
        String config = FakeHub.gitBlobId(Files.readAllBytes(Golden.dir("qwen2").resolve("config.json")));
        String weights = FakeHub.sha256(Files.readAllBytes(Golden.dir("qwen2").resolve("model.safetensors")));
        String tokenizer = FakeHub.gitBlobId("{\"model_max_length\": 64}".getBytes());
        assertThat(cacheTree()).containsExactlyInAnyOrder(
                "blobs/" + config, "blobs/" + tokenizer, "blobs/" + weights,
                "refs/main",
                "snapshots/" + COMMIT + "/config.json -> ../../blobs/" + config,
                "snapshots/" + COMMIT + "/model.safetensors -> ../../blobs/" + weights,
                "snapshots/" + COMMIT + "/tokenizer_config.json -> ../../blobs/" + tokenizer);
        assertThat(Files.readString(repoDir().resolve("refs/main"))).isEqualTo(COMMIT);
        // the model loads from the snapshot
        ModelConfig mc = HfConfig.read(dir);
        assertThat(mc).isEqualTo(Golden.config("qwen2"));
        try (HfCheckpoint ignored = HfCheckpoint.open(dir, LlamaModel.layout(mc))) {
            assertThat(progress).anyMatch(l -> l.contains("downloading " + REPO + "/model.safetensors"));
        }
        // the token goes to the endpoint's host, never to the host the weights are redirected to
        assertThat(hub.requests).filteredOn(r -> r.path().startsWith("/api/") || r.path().contains("/resolve/"))
                .allMatch(r -> "Bearer hf_secret".equals(r.authorization()));
        assertThat(hub.requests).filteredOn(r -> r.path().startsWith("/cdn/")).isNotEmpty()
                .allMatch(r -> r.authorization() == null);
        assertThat(hub.requests).noneMatch(r -> r.path().contains("pytorch_model.bin") || r.path().contains("README"));
        keepForHuggingfaceHub();
    }

    /** For a manual check with huggingface_hub's scan_cache_dir: -Dfsdp4j.keepHubCache=DIR copies the cache there. */
    private void keepForHuggingfaceHub() throws IOException {
        String keep = System.getProperty("fsdp4j.keepHubCache");
        if (keep == null) {
            return;
        }
        try (Stream<Path> walk = Files.walk(cacheRoot)) {
            for (Path p : walk.toList()) {
                Path to = Path.of(keep).resolve(cacheRoot.relativize(p).toString());
                if (Files.isDirectory(p, LinkOption.NOFOLLOW_LINKS)) {
                    Files.createDirectories(to);
                } else {
                    Files.copy(p, to, LinkOption.NOFOLLOW_LINKS);
                }
            }
        }
    }

    @Test
    void aCompleteSnapshotIsUsedWithoutADownloadAndOfflineWithoutAsking() {
        Path first = resolve(REPO, env());
        int downloads = hub.downloads().size();
        assertThat(resolve(REPO + "@main", env())).isEqualTo(first);
        assertThat(hub.downloads()).hasSize(downloads); // only the revision was asked for
        int requests = hub.requests.size();
        assertThat(resolve(REPO, env("HF_HUB_OFFLINE", "1"))).isEqualTo(first);
        assertThat(resolve(REPO + "@" + COMMIT, env("HF_HUB_OFFLINE", "1"))).isEqualTo(first);
        assertThat(resolve(REPO + "@" + COMMIT, env())).isEqualTo(first); // a cached commit never changes
        assertThat(hub.requests).hasSize(requests);
    }

    /**
     * The layout huggingface_hub writes: refs/main holding the commit (no newline), blobs named by sha256 (LFS) or git
     * blob id, relative links from snapshots/{commit}/ into blobs/, and .locks/ beside the repositories.
     */
    private void writeCacheAsHuggingfaceHubDoes() throws IOException {
        Path repo = repoDir();
        Files.createDirectories(repo.resolve("refs"));
        Files.writeString(repo.resolve("refs/main"), COMMIT);
        Files.createDirectories(repo.resolve("blobs"));
        Files.createDirectories(repo.resolve("snapshots").resolve(COMMIT));
        for (FakeHub.File f : qwen2Files()) {
            Files.write(repo.resolve("blobs").resolve(f.etag()), f.content());
            Files.createSymbolicLink(repo.resolve("snapshots").resolve(COMMIT).resolve(f.name()),
                    Path.of("..", "..", "blobs", f.etag()));
        }
        Files.createDirectories(cacheRoot.resolve(".locks").resolve(repo.getFileName()));
    }

    @Test
    void aCacheWrittenByHuggingfaceHubIsUsedWithoutADownload() throws IOException {
        writeCacheAsHuggingfaceHubDoes();
        Path repo = repoDir();
        Path expected = repo.resolve("snapshots").resolve(COMMIT);
        assertThat(resolve(REPO, env())).isEqualTo(expected);
        assertThat(hub.downloads()).isEmpty();
        assertThat(hub.requests).hasSize(1); // the revision's commit, nothing else
        assertThat(resolve(REPO, env("HF_HUB_OFFLINE", "true"))).isEqualTo(expected);
        assertThat(HfConfig.read(expected)).isEqualTo(Golden.config("qwen2"));

        // with the Hub unreachable, the revision cached last is used, and said so
        hub.close();
        assertThat(resolve(REPO, env())).isEqualTo(expected);
        assertThat(progress).anyMatch(l -> l.startsWith("cannot reach " + hub.endpoint()) && l.contains(COMMIT));
    }

    /** The commands take the id where they take a model directory: train's model.path, score's --model. */
    @Test
    void trainAndScoreTakeAHubIdFromTheCache() throws Exception {
        writeCacheAsHuggingfaceHubDoes();
        Path data = Golden.jsonl("qwen2", "batch.json", true, tmp);
        String java = ProcessHandle.current().info().command().orElseThrow();
        List<List<String>> commands = List.of(
                List.of("score", "--model", REPO, "--data", data.toString()),
                List.of("train", "--set", "model.path=" + REPO + "@main", "--set", "data.train=" + data, "--set",
                        "data.seq_len=16", "--set", "train.steps=1", "--set", "dist.ranks=1", "--set",
                        "checkpoint.dir=" + tmp.resolve("ck")),
                List.of("score", "--model", "acme/absent", "--data", data.toString()));
        List<String> logs = new ArrayList<>();
        List<Integer> status = new ArrayList<>();
        for (List<String> args : commands) {
            List<String> command = new ArrayList<>(List.of(java, "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC",
                    "--add-modules", "jdk.incubator.vector", "-cp", System.getProperty("java.class.path"),
                    "io.fsdp4j.cli.Main"));
            command.addAll(args);
            Path log = tmp.resolve("child-" + logs.size() + ".log");
            ProcessBuilder builder = new ProcessBuilder(command).redirectErrorStream(true).redirectOutput(log.toFile());
            builder.environment().putAll(env("HF_HUB_OFFLINE", "1"));
            Process child = builder.start();
            assertThat(child.waitFor(120, TimeUnit.SECONDS)).isTrue();
            status.add(child.exitValue());
            logs.add(Files.readString(log));
        }
        Path snapshot = repoDir().resolve("snapshots").resolve(COMMIT);
        assertThat(status.get(0)).as(logs.get(0)).isZero();
        assertThat(logs.get(0)).contains("\"mean_loss\"");
        assertThat(status.get(1)).as(logs.get(1)).isZero();
        // the checkpoint records the snapshot, which export reads the tokenizer files from
        assertThat(Files.readString(tmp.resolve("ck/step-00000001/index.json"))).contains(snapshot.toString());
        assertThat(status.get(2)).isEqualTo(2);
        assertThat(logs.get(2)).contains("error: --model acme/absent is not a directory, and acme/absent@main is not"
                + " in the Hugging Face cache " + cacheRoot);
    }

    @Test
    void aBranchThatMovedIsFetchedAgainAndItsRefUpdated() throws IOException {
        resolve(REPO, env());
        List<FakeHub.File> changed = new ArrayList<>(qwen2Files());
        changed.set(2, new FakeHub.File("tokenizer_config.json", "{\"model_max_length\": 32}".getBytes(), false));
        hub.publish(REPO, "main", COMMIT2, changed);
        int downloads = hub.downloads().size();
        Path dir = resolve(REPO, env());
        assertThat(dir).isEqualTo(repoDir().resolve("snapshots").resolve(COMMIT2));
        assertThat(Files.readString(repoDir().resolve("refs/main"))).isEqualTo(COMMIT2);
        assertThat(hub.downloads().size() - downloads).isEqualTo(1); // only the changed file: the blobs are shared
        assertThat(Files.readString(dir.resolve("tokenizer_config.json"))).contains("32");
    }

    @Test
    void aShardedModelIsFetchedThroughItsIndex() throws IOException {
        Path dir = Golden.dir("llama-sharded");
        List<FakeHub.File> files = new ArrayList<>();
        try (Stream<Path> list = Files.list(dir)) {
            for (Path p : list.sorted().toList()) {
                files.add(new FakeHub.File(p.getFileName().toString(), Files.readAllBytes(p),
                        p.toString().endsWith(".safetensors")));
            }
        }
        files.add(new FakeHub.File("consolidated.safetensors", "a copy in another layout".getBytes(), true));
        hub.publish("acme/sharded", "main", COMMIT2, files);
        Path snapshot = resolve("acme/sharded", env());
        ModelConfig mc = HfConfig.read(snapshot);
        try (HfCheckpoint ignored = HfCheckpoint.open(snapshot, LlamaModel.layout(mc))) {
            assertThat(snapshot.resolve("model-00002-of-00002.safetensors")).isRegularFile();
        }
        assertThat(hub.requests).noneMatch(r -> r.path().contains("consolidated"));
    }

    @Test
    void aTruncatedDownloadStaysIncompleteAndIsResumed() throws IOException {
        byte[] weights = Files.readAllBytes(Golden.dir("qwen2").resolve("model.safetensors"));
        String sha = FakeHub.sha256(weights);
        hub.cutNextDownload("model.safetensors", 5000);

        assertThatThrownBy(() -> resolve(REPO, env())).isInstanceOf(UserError.class)
                .hasMessageNotContaining("\n")
                .hasMessageContaining("download of " + REPO + "/model.safetensors stopped at 5000 of " + weights.length
                        + " bytes").hasMessageContaining("run again to resume");
        // nothing looks complete: the partial file under blobs/*.incomplete only, no ref, no link to it
        assertThat(cacheTree()).contains("blobs/" + sha + ".incomplete")
                .noneMatch(l -> l.equals("blobs/" + sha) || l.startsWith("refs/") || l.contains("model.safetensors"));
        assertThatThrownBy(() -> resolve(REPO, env("HF_HUB_OFFLINE", "1"))).isInstanceOf(UserError.class)
                .hasMessageContaining("is not in the Hugging Face cache");

        Path dir = resolve(REPO, env());
        assertThat(hub.requests).anyMatch(r -> "bytes=5000-".equals(r.range()));
        assertThat(Files.readAllBytes(dir.resolve("model.safetensors"))).isEqualTo(weights);
        assertThat(cacheTree()).noneMatch(l -> l.endsWith(".incomplete"));
    }

    @Test
    void aDownloadWhoseHashDiffersIsRemovedAndRefused() throws IOException {
        hub.corrupt("model.safetensors");
        String sha = FakeHub.sha256(Files.readAllBytes(Golden.dir("qwen2").resolve("model.safetensors")));
        assertThatThrownBy(() -> resolve(REPO, env())).isInstanceOf(UserError.class)
                .hasMessageNotContaining("\n")
                .hasMessageContaining("download of " + REPO + "/model.safetensors has sha256 ")
                .hasMessageContaining("but the Hub lists " + sha);
        assertThat(cacheTree()).noneMatch(l -> l.contains(sha) || l.startsWith("refs/") || l.contains("model.safetensors"));
    }

    @Test
    void anUnknownRevisionOrRepositoryIsRefusedInOneLineAndNothingIsCached() {
        assertThatThrownBy(() -> resolve(REPO + "@v9", env())).isInstanceOf(UserError.class)
                .hasMessage("model.path " + REPO + "@v9 (not a directory, so a Hub id): revision 'v9' does not exist"
                        + " in " + REPO + " on " + hub.endpoint() + "; give a branch, tag or commit of it (" + REPO
                        + "@main)");
        assertThatThrownBy(() -> resolve("acme/nothing", env())).isInstanceOf(UserError.class)
                .hasMessageStartingWith("model.path acme/nothing (not a directory, so a Hub id): acme/nothing is not"
                        + " on " + hub.endpoint() + " or needs access (HTTP 401, RepositoryNotFound)");
        assertThat(cacheRoot.resolve("models--acme--nothing")).doesNotExist();
        assertThat(repoDir()).doesNotExist();
    }

    @Test
    void offlineAnIdNotInTheCacheIsRefusedInOneLine() {
        assertThatThrownBy(() -> resolve(REPO, env("HF_HUB_OFFLINE", "1"))).isInstanceOf(UserError.class)
                .hasMessage("model.path " + REPO + " is not a directory, and " + REPO + "@main is not in the Hugging"
                        + " Face cache " + cacheRoot + " (HF_HUB_OFFLINE is set, so nothing is downloaded); download it"
                        + " first or give a directory");
        assertThat(hub.requests).isEmpty();
    }

    @Test
    void aDirectoryOrAPathThatIsNoIdIsLeftAsItIs() throws IOException {
        Path local = tmp.resolve("acme").resolve("tiny-qwen2");
        Files.createDirectories(local);
        assertThat(ModelLocation.resolve(local, "model.path", env(), progress::add)).isEqualTo(local);
        assertThat(resolve("/models/none", env())).isEqualTo(Path.of("/models/none"));
        assertThat(resolve("none", env())).isEqualTo(Path.of("none"));
        assertThat(hub.requests).isEmpty();
    }

    @Test
    void theCacheIsFoundAsHuggingfaceHubFindsIt() {
        assertThat(HubCache.rootFrom(Map.of("HF_HUB_CACHE", "/c", "HF_HOME", "/h"))).isEqualTo(Path.of("/c"));
        assertThat(HubCache.rootFrom(Map.of("HF_HOME", "/h"))).isEqualTo(Path.of("/h/hub"));
        assertThat(HubCache.rootFrom(Map.of("XDG_CACHE_HOME", "/x"))).isEqualTo(Path.of("/x/huggingface/hub"));
        assertThat(HubCache.rootFrom(Map.of())).isEqualTo(Path.of(System.getProperty("user.home"), ".cache",
                "huggingface", "hub"));
        assertThat(HubId.parse("Qwen/Qwen2.5-7B")).contains(new HubId("Qwen/Qwen2.5-7B", "main"));
        assertThat(HubId.parse("Qwen/Qwen2.5-7B@v1.0")).contains(new HubId("Qwen/Qwen2.5-7B", "v1.0"));
        assertThat(HubId.parse("a/b/c")).isEmpty();
        assertThat(HubId.parse("../x")).isEmpty();
        assertThat(ModelLocation.offline(Map.of("HF_HUB_OFFLINE", "yes"))).isTrue();
        assertThat(ModelLocation.offline(Map.of("HF_HUB_OFFLINE", "0"))).isFalse();
    }
}
