package io.fsdp4j.config;

import io.fsdp4j.UserError;
import java.util.LinkedHashMap;
import java.util.Map;

/**
 * {@code fsdp.*}: how parameters, gradients and optimizer state are spread over the ranks. Master weights and
 * optimizer state are always fp32.
 *
 * @param strategy                {@code fsdp.strategy}
 * @param shardSize               {@code fsdp.shard_size}: ranks in one shard group of a hybrid strategy; 0 means the
 *                                default, the ranks of one node. Only hybrid strategies accept a non-zero value.
 * @param paramDtype              {@code fsdp.param_dtype}: the type parameters are gathered and computed in (fp8:
 *                                bf16, the blocks' linear products in fp8)
 * @param reduceDtype             {@code fsdp.reduce_dtype}: the type gradients are reduced in
 * @param activationCheckpointing {@code fsdp.activation_checkpointing}
 * @param cpuOffload              {@code fsdp.cpu_offload}: keep parameter and optimizer shards in host memory
 * @param prefetch                {@code fsdp.prefetch}: how many units ahead of the one computing have their
 *                                all-gather started (0: each when needed; 1: the next one, the default)
 * @param lossScale               {@code fsdp.loss_scale} and its two companions ({@link LossScaling}): by default
 *                                dynamic where parameters or reductions are fp16, else none
 * @param paramCopy               {@code fsdp.param_copy}: the gathers' half-precision parameters rounded at each gather
 *                                or kept beside the master shards ({@link ParamCopy})
 * @param fp8Recipe               {@code fsdp.fp8_recipe}: how fp8 products scale their operands ({@link Fp8Recipe});
 *                                anything but the default needs {@code fsdp.param_dtype: fp8}
 * @param blocksNotCheckpointed   {@code fsdp.blocks_not_checkpointed}: how many of the model's last blocks keep every
 *                                activation (as {@code none}) while the others follow
 *                                {@code fsdp.activation_checkpointing}: memory the checkpointing leaves spent on
 *                                speed (0: every block checkpointed; more than the model has: none)
 * @param blocksSelective         {@code fsdp.blocks_selective}: how many blocks before those not checkpointed are
 *                                checkpointed selectively (their products' and attention's outputs kept, their norms
 *                                and MLP activation recomputed) where {@code fsdp.activation_checkpointing} recomputes
 *                                whole blocks ({@code full}, {@code full_keep_attention}): the same memory spent on
 *                                more blocks ({@link ActivationCheckpointing#ofBlock(int, int, int, int)})
 * @param autoCheckpointing       {@code fsdp.activation_checkpointing: auto} (a fine-tune's default on GPUs): the run
 *                                chooses the mode and both block counts at its start, the fastest split that the plan
 *                                predicts to fit the GPUs' memory ({@code train.MemoryFit}); until then the
 *                                mode reads {@link ActivationCheckpointing#FULL}, the one that keeps the least, and
 *                                both counts 0
 * @param autoParamCopy           {@code fsdp.param_copy: auto} (a fine-tune's default on GPUs): the run chooses
 *                                {@code kept} where the plan predicts it faster and still fitting with the checkpointing
 *                                (chosen alongside when that is auto too), else {@code per_gather}; until then it
 *                                reads per_gather. Either gives the same numbers.
 */
public record FsdpSection(ShardingStrategy strategy, int shardSize, Precision paramDtype, Precision reduceDtype,
                          ActivationCheckpointing activationCheckpointing, boolean cpuOffload, int prefetch,
                          LossScaling lossScale, ParamCopy paramCopy, Fp8Recipe fp8Recipe, int blocksNotCheckpointed,
                          int blocksSelective, boolean autoCheckpointing, boolean autoParamCopy) {
    /** {@code fsdp.prefetch} unless one is chosen: the next unit's gather beside this unit's compute. */
    public static final int DEFAULT_PREFETCH = 1;
    /** The most units a gather may be started ahead: each holds a unit's full parameters. */
    public static final int MAX_PREFETCH = 8;
    /** {@code fsdp.param_copy} unless one is chosen. */
    public static final ParamCopy DEFAULT_PARAM_COPY = ParamCopy.PER_GATHER;
    /** {@code fsdp.fp8_recipe} unless one is chosen. */
    public static final Fp8Recipe DEFAULT_FP8_RECIPE = Fp8Recipe.TENSORWISE;

    public FsdpSection {
        Check.present("fsdp.strategy", strategy);
        Check.atLeast("fsdp.shard_size", shardSize, 0);
        Check.present("fsdp.param_dtype", paramDtype);
        Check.present("fsdp.reduce_dtype", reduceDtype);
        if (reduceDtype == Precision.FP8) {
            throw new UserError("config key 'fsdp.reduce_dtype' cannot be fp8 (fp8 is for fsdp.param_dtype: the blocks'"
                    + " products); reduce in bf16 or fp32");
        }
        Check.present("fsdp.activation_checkpointing", activationCheckpointing);
        Check.between("fsdp.prefetch", prefetch, 0, MAX_PREFETCH);
        Check.present("fsdp.loss_scale", lossScale);
        Check.present("fsdp.param_copy", paramCopy);
        Check.present("fsdp.fp8_recipe", fp8Recipe);
        if (fp8Recipe != DEFAULT_FP8_RECIPE && paramDtype != Precision.FP8) {
            throw new UserError("config key 'fsdp.fp8_recipe' applies only to fp8 products (fsdp.param_dtype is "
                    + paramDtype.spelling() + "); set fsdp.param_dtype=fp8 or leave fsdp.fp8_recipe at "
                    + DEFAULT_FP8_RECIPE.spelling());
        }
        Check.atLeast("fsdp.blocks_not_checkpointed", blocksNotCheckpointed, 0);
        if (blocksNotCheckpointed > 0 && activationCheckpointing == ActivationCheckpointing.NONE) {
            throw new UserError("config key 'fsdp.blocks_not_checkpointed' applies only where blocks are checkpointed"
                    + " (fsdp.activation_checkpointing is none); set fsdp.activation_checkpointing=full (or"
                    + " full_keep_attention, selective) or leave fsdp.blocks_not_checkpointed at 0");
        }
        Check.atLeast("fsdp.blocks_selective", blocksSelective, 0);
        if (blocksSelective > 0 && !activationCheckpointing.recomputesBlocks()) {
            throw new UserError("config key 'fsdp.blocks_selective' applies only where whole blocks are recomputed"
                    + " (fsdp.activation_checkpointing is " + activationCheckpointing.spelling() + "); set"
                    + " fsdp.activation_checkpointing=full_keep_attention (or full) or leave fsdp.blocks_selective at 0");
        }
        if (autoParamCopy && paramCopy != DEFAULT_PARAM_COPY) {
            throw new IllegalArgumentException("auto param copy reads " + DEFAULT_PARAM_COPY + " until decided");
        }
        if (autoCheckpointing && (activationCheckpointing != ActivationCheckpointing.FULL || blocksNotCheckpointed > 0
                || blocksSelective > 0)) {
            throw new UserError("fsdp.activation_checkpointing=auto chooses fsdp.blocks_not_checkpointed and"
                    + " fsdp.blocks_selective itself; leave them at 0, or name a mode (full, full_keep_attention,"
                    + " selective, none) to set them");
        }
        if (shardSize > 0 && !strategy.hybrid()) {
            throw new UserError("config key 'fsdp.shard_size' applies only to hybrid_shard and hybrid_shard_zero2"
                    + " (fsdp.strategy is " + strategy.spelling() + "); leave it at 0");
        }
    }

    /** With the loss scaling {@code auto} chooses for the two precisions, parameters rounded at each gather. */
    public FsdpSection(ShardingStrategy strategy, int shardSize, Precision paramDtype, Precision reduceDtype,
                       ActivationCheckpointing activationCheckpointing, boolean cpuOffload, int prefetch) {
        this(strategy, shardSize, paramDtype, reduceDtype, activationCheckpointing, cpuOffload, prefetch,
                LossScaling.auto(paramDtype, reduceDtype), DEFAULT_PARAM_COPY, DEFAULT_FP8_RECIPE, 0, 0, false,
                false);
    }

    public static FsdpSection defaults() {
        return new FsdpSection(ShardingStrategy.FULL_SHARD, 0, Precision.FP32, Precision.FP32,
                ActivationCheckpointing.NONE, false, DEFAULT_PREFETCH);
    }

    /**
     * Binds {@code fsdp.*} with these defaults for the parameters' dtype, and for the checkpointing and the parameter
     * copy ({@code auto} when {@code autoDefault}, else {@link #defaults()}'s).
     */
    static FsdpSection bind(ConfigSection s, Precision paramDtypeDefault, boolean autoDefault) {
        var d = defaults();
        var strategy = s.choice("strategy", ShardingStrategy.class, d.strategy());
        int shardSize = s.integer("shard_size", d.shardSize());
        var paramDtype = s.choice("param_dtype", Precision.class, paramDtypeDefault);
        var reduceDtype = s.choice("reduce_dtype", Precision.class, d.reduceDtype());
        var checkpointing = s.choiceOrAuto("activation_checkpointing", ActivationCheckpointing.class,
                autoDefault ? null : d.activationCheckpointing());
        boolean cpuOffload = s.bool("cpu_offload", d.cpuOffload());
        int prefetch = s.integer("prefetch", d.prefetch());
        var lossScale = LossScaling.bind(s, paramDtype, reduceDtype);
        var paramCopy = s.choiceOrAuto("param_copy", ParamCopy.class, autoDefault ? null : d.paramCopy());
        var fp8Recipe = s.choice("fp8_recipe", Fp8Recipe.class, d.fp8Recipe());
        int notCheckpointed = s.integer("blocks_not_checkpointed", d.blocksNotCheckpointed());
        int selective = s.integer("blocks_selective", d.blocksSelective());
        s.finish();
        return new FsdpSection(strategy, shardSize, paramDtype, reduceDtype,
                checkpointing == null ? ActivationCheckpointing.FULL : checkpointing, cpuOffload, prefetch, lossScale,
                paramCopy == null ? DEFAULT_PARAM_COPY : paramCopy, fp8Recipe, notCheckpointed, selective,
                checkpointing == null, paramCopy == null);
    }

    Map<String, Object> toMap() {
        var m = new LinkedHashMap<String, Object>();
        m.put("strategy", strategy.spelling());
        m.put("shard_size", shardSize);
        m.put("param_dtype", paramDtype.spelling());
        m.put("reduce_dtype", reduceDtype.spelling());
        m.put("activation_checkpointing", autoCheckpointing ? ConfigTree.AUTO : activationCheckpointing.spelling());
        m.put("cpu_offload", cpuOffload);
        m.put("prefetch", prefetch);
        m.put("loss_scale", lossScale.spelling());
        m.put("loss_scale_init", lossScale.initSetting());
        m.put("loss_scale_growth_interval", lossScale.growthInterval());
        m.put("param_copy", autoParamCopy ? ConfigTree.AUTO : paramCopy.spelling());
        m.put("fp8_recipe", fp8Recipe.spelling());
        m.put("blocks_not_checkpointed", blocksNotCheckpointed);
        m.put("blocks_selective", blocksSelective);
        return m;
    }
}
