package io.fsdp4j.hf;

import java.util.Optional;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * A model on the Hugging Face Hub as users name it: {@code org/name}, with an optional {@code @revision} (a branch, a
 * tag or a commit hash; {@code main} when absent), as in {@code Qwen/Qwen2.5-7B@main}.
 *
 * @param repo     {@code org/name}
 * @param revision the branch, tag or commit asked for
 */
public record HubId(String repo, String revision) {
    public static final String DEFAULT_REVISION = "main";
    private static final Pattern ID = Pattern.compile("([A-Za-z0-9][A-Za-z0-9_.-]*/[A-Za-z0-9][A-Za-z0-9_.-]*)(?:@([^@\\s]+))?");
    private static final Pattern COMMIT = Pattern.compile("[0-9a-f]{40}");

    /** {@code text} read as a Hub id, or empty when it cannot be one. */
    public static Optional<HubId> parse(String text) {
        Matcher m = ID.matcher(text);
        if (!m.matches() || m.group(1).contains("..") || m.group(1).endsWith(".git")) {
            return Optional.empty();
        }
        return Optional.of(new HubId(m.group(1), m.group(2) == null ? DEFAULT_REVISION : m.group(2)));
    }

    /** Whether the revision is a full commit hash (which never moves, unlike a branch or tag). */
    public boolean isCommit() {
        return isCommit(revision);
    }

    static boolean isCommit(String revision) {
        return COMMIT.matcher(revision).matches();
    }

    /** The cache folder name huggingface_hub gives the repository: {@code models--org--name}. */
    public String folderName() {
        return "models--" + repo.replace("/", "--");
    }

    @Override
    public String toString() {
        return repo + "@" + revision;
    }
}
