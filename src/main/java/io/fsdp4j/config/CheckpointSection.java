package io.fsdp4j.config;

import io.fsdp4j.UserError;
import java.nio.file.Path;
import java.util.LinkedHashMap;
import java.util.Map;

/**
 * {@code checkpoint.*}: sharded checkpoints.
 *
 * @param dir    {@code checkpoint.dir}: where checkpoints go, or null for none
 * @param every  {@code checkpoint.every}: save every this many steps (and at the end); 0 saves only at the end, and
 *               only when {@code dir} is set
 * @param keep   {@code checkpoint.keep}: how many of the newest checkpoints to keep, >= 1
 * @param resume {@code checkpoint.resume}: {@code none}, {@code auto} (the newest checkpoint in {@code dir}, if any),
 *               or the path of a checkpoint (a {@code step-N} directory, or a checkpoint directory: its newest)
 * @param allowChanges {@code checkpoint.allow_changes}: resume even with settings that make the run other than a
 *               continuation of the checkpoint's (data, data.seq_len, data.pack, batch, seed, ranks); every difference
 *               is stated either way
 */
public record CheckpointSection(Path dir, int every, int keep, String resume, boolean allowChanges) {
    public static final String RESUME_NONE = "none";
    public static final String RESUME_AUTO = "auto";

    public CheckpointSection {
        if (resume != null && (resume.equalsIgnoreCase(RESUME_NONE) || resume.equalsIgnoreCase(RESUME_AUTO))) {
            resume = resume.toLowerCase(java.util.Locale.ROOT); // as the other choices, in any case
        }
        Check.atLeast("checkpoint.every", every, 0);
        Check.atLeast("checkpoint.keep", keep, 1);
        Check.present("checkpoint.resume", resume);
        if (every > 0 && dir == null) {
            throw new UserError("config key 'checkpoint.every' is " + every + " but 'checkpoint.dir' is not set");
        }
        if (resume.equals(RESUME_AUTO) && dir == null) {
            throw new UserError("config key 'checkpoint.resume' is auto but 'checkpoint.dir' is not set");
        }
    }

    public CheckpointSection(Path dir, int every, int keep, String resume) {
        this(dir, every, keep, resume, false);
    }

    public static CheckpointSection defaults() {
        return new CheckpointSection(null, 0, 2, RESUME_NONE);
    }

    /** The checkpoint to resume from when {@code resume} names one; null for {@code none} and {@code auto}. */
    public Path resumePath() {
        return resume.equals(RESUME_NONE) || resume.equals(RESUME_AUTO) ? null : Path.of(resume);
    }

    static CheckpointSection bind(ConfigTree.Section s) {
        var d = defaults();
        var dir = s.path("dir");
        int every = s.integer("every", d.every());
        int keep = s.integer("keep", d.keep());
        String resume = s.string("resume", d.resume());
        boolean allowChanges = s.bool("allow_changes", d.allowChanges());
        s.finish();
        return new CheckpointSection(dir, every, keep, resume, allowChanges);
    }

    Map<String, Object> toMap() {
        var m = new LinkedHashMap<String, Object>();
        m.put("dir", TrainConfig.text(dir));
        m.put("every", every);
        m.put("keep", keep);
        m.put("resume", resume);
        m.put("allow_changes", allowChanges);
        return m;
    }
}
