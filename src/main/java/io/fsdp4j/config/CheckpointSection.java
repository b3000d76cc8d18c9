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
 * @param exportEvery {@code checkpoint.export_every}: also export the checkpoint saved every this many steps (a
 *               multiple of {@code every}), and the last one, to a Hugging Face directory {@code dir/hf-step-N},
 *               while training goes on; 0 (the default): no export
 * @param allowChanges {@code checkpoint.allow_changes}: resume even with settings that make the run other than a
 *               continuation of the checkpoint's (data, data.seq_len, data.pack, batch, seed, ranks); every difference
 *               is stated either way
 */
public record CheckpointSection(Path dir, int every, int keep, String resume, int exportEvery, boolean allowChanges) {
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
        Check.atLeast("checkpoint.export_every", exportEvery, 0);
        if (exportEvery > 0 && dir == null) {
            throw new UserError("config key 'checkpoint.export_every' is " + exportEvery + " but 'checkpoint.dir' is not"
                    + " set (an export is written from a saved checkpoint)");
        }
        if (exportEvery > 0 && every > 0 && exportEvery % every != 0) {
            throw new UserError("config key 'checkpoint.export_every' (" + exportEvery + ") must be a multiple of"
                    + " 'checkpoint.every' (" + every + "): an export is written from a saved checkpoint");
        }
    }

    public CheckpointSection(Path dir, int every, int keep, String resume) {
        this(dir, every, keep, resume, 0, false);
    }

    public static CheckpointSection defaults() {
        return new CheckpointSection(null, 0, 2, RESUME_NONE, 0, false);
    }


    /** The checkpoint to resume from when {@code resume} names one; null for {@code none} and {@code auto}. */
    public Path resumePath() {
        return resume.equals(RESUME_NONE) || resume.equals(RESUME_AUTO) ? null : Path.of(resume);
    }

    static CheckpointSection bind(ConfigSection s) {
        var d = defaults();
        var dir = s.path("dir");
        int every = s.integer("every", d.every());
        int keep = s.integer("keep", d.keep());
        String resume = s.string("resume", d.resume());
        int exportEvery = s.integer("export_every", d.exportEvery());
        boolean allowChanges = s.bool("allow_changes", d.allowChanges());
        s.finish();
        return new CheckpointSection(dir, every, keep, resume, exportEvery, allowChanges);
    }

    Map<String, Object> toMap() {
        var m = new LinkedHashMap<String, Object>();
        m.put("dir", TrainConfig.text(dir));
        m.put("every", every);
        m.put("keep", keep);
        m.put("resume", resume);
        m.put("export_every", exportEvery);
        m.put("allow_changes", allowChanges);
        return m;
    }
}
