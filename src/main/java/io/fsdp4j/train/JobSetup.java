package io.fsdp4j.train;

import io.fsdp4j.UserError;
import io.fsdp4j.comm.DeviceMesh;
import io.fsdp4j.config.Precision;
import io.fsdp4j.config.TrainConfig;
import io.fsdp4j.cuda.Cuda;
import io.fsdp4j.cuda.NativeLibraries;
import io.fsdp4j.fsdp.FsdpPolicy;
import io.fsdp4j.job.InProcessWorld;
import io.fsdp4j.job.JobLayout;
import io.fsdp4j.job.JobStart;
import io.fsdp4j.job.LocalRanks;
import io.fsdp4j.job.NcclWorld;
import io.fsdp4j.preflight.NodeFacts;
import io.fsdp4j.preflight.Preflight;
import java.time.Duration;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.stream.IntStream;

/**
 * How a training config becomes this process's part of a job: where the process stands in the job (from
 * {@code dist.*} and torchrun-style or Slurm variables), the mesh of every rank, the sharding policy, and the ranks of
 * this process started (GPUs through NCCL or CPU threads; with several processes, the rendezvous and the preflight
 * first). What runs on the ranks is {@link TrainingJob}'s.
 */
public final class JobSetup {
    private JobSetup() {}

    /** Where this process stands in the job: from {@code dist.*} and torchrun-style or Slurm variables. */
    public static JobLayout layout(TrainConfig config) {
        return JobLayout.resolve(config.dist(), System.getenv());
    }

    /** The mesh of every rank of the job that {@code config} and this process's environment describe. */
    public static DeviceMesh mesh(TrainConfig config) {
        return mesh(config, layout(config));
    }

    /** The mesh of every rank of {@code config}'s job laid out as {@code job}; refuses an impossible one. */
    public static DeviceMesh mesh(TrainConfig config, JobLayout job) {
        int ranks = job.worldSize();
        return DeviceMesh.of(ranks, policy(config).shardSize(ranks, config.fsdp().shardSize(), job.ranksPerNode()));
    }

    /** The sharding of {@code config}'s fsdp section. */
    public static FsdpPolicy policy(TrainConfig config) {
        return FsdpPolicy.of(config.fsdp());
    }

    /**
     * Whether {@code config}'s ranks are GPUs: dist.device=cuda (refused in one line when CUDA cannot be used), or
     * auto on a machine where it can.
     */
    public static boolean onCuda(TrainConfig config) {
        return switch (config.dist().device()) {
            case CPU -> false;
            case CUDA -> {
                NativeLibraries.whyCudaUnavailable().ifPresent(why -> {
                    throw new UserError("dist.device=cuda: " + why);
                });
                yield true;
            }
            case AUTO -> NativeLibraries.cudaAvailable();
        };
    }

    /** The ranks of this process for the configured device: GPUs through NCCL, or CPU threads. */
    public static LocalRanks localRanks(TrainConfig config, DeviceMesh mesh) {
        return start(config, mesh, false).ranks();
    }

    /**
     * This process's part of the job, started: the rendezvous and the preflight when the job has several processes,
     * then the ranks of this process.
     *
     * @param mayShrink the caller copes with a smaller job than {@code mesh}: with {@code dist.exclude_unhealthy}, the
     *                  preflight may start the job without unhealthy nodes, and the layout and the mesh are then the
     *                  smaller job's
     */
    public static JobStart.Joined start(TrainConfig config, DeviceMesh mesh, boolean mayShrink) {
        JobLayout job = layout(config);
        if (job.multiProcess() && config.dist().shareGpu()) {
            throw new UserError("dist.share_gpu puts the ranks of one process on one GPU, but this job spans "
                    + job.processes() + " processes: leave dist.share_gpu out, or run the job as one process");
        }
        boolean cuda = onCuda(config);
        if (cuda) {
            var gpus = IntStream.range(0, Cuda.deviceCount()).mapToObj(Cuda::properties).toList();
            bf16Refusal(config.fsdp().paramDtype(), gpus).or(() -> fp8Refusal(config.fsdp().paramDtype(), gpus))
                    .ifPresent(why -> {
                        throw new UserError(why);
                    });
        }
        if (job.multiProcess()) { // the rendezvous, the job's start checks, then the ranks of this process
            return JobStart.join(job, mesh, cuda ? JobStart.Device.CUDA : JobStart.Device.CPU, sharedSettings(config),
                    System.getenv(), Preflight.atJobStart(config, cuda, System.getenv(),
                            mayShrink ? layout -> mesh(config, layout) : null));
        }
        Duration timeout = JobStart.collectiveTimeout(System.getenv());
        if (!cuda) {
            return new JobStart.Joined(job, new InProcessWorld(mesh, timeout));
        }
        return new JobStart.Joined(job, config.dist().shareGpu() ? InProcessWorld.sharingOneGpu(mesh, timeout)
                : new NcclWorld(mesh));
    }

    /**
     * Why {@code paramDtype} cannot run on {@code gpus}, if it cannot: bf16 products need sm_80 or later (cuBLASLt has
     * none on V100's sm_70 or T4's sm_75), where fp16 runs.
     */
    static Optional<String> bf16Refusal(Precision paramDtype, List<Cuda.DeviceProperties> gpus) {
        if (paramDtype != Precision.BF16) {
            return Optional.empty();
        }
        return gpus.stream().filter(g -> g.major() < 8).findFirst().map(g -> "fsdp.param_dtype=bf16: GPU " + g.device()
                + " (" + g.name() + ", " + g.arch() + ") has no bf16 matrix products (they need sm_80 or later); set "
                + "fsdp.param_dtype=fp16 (with dynamic loss scaling) or fp32");
    }

    /**
     * Why {@code paramDtype} cannot run on {@code gpus}, if it is fp8 and cannot: fp8 products need sm_89 or later
     * (Ada, Hopper; cuBLASLt has none before), bf16 and fp16 run on earlier GPUs.
     */
    static Optional<String> fp8Refusal(Precision paramDtype, List<Cuda.DeviceProperties> gpus) {
        if (paramDtype != Precision.FP8) {
            return Optional.empty();
        }
        return gpus.stream().filter(g -> g.major() * 10 + g.minor() < 89).findFirst().map(g -> "fsdp.param_dtype=fp8: "
                + "GPU " + g.device() + " (" + g.name() + ", " + g.arch() + ") has no fp8 matrix products (they need "
                + "sm_89 or later: Ada, Hopper); set fsdp.param_dtype=" + (g.major() < 8 ? "fp16" : "bf16"));
    }

    /**
     * What every process of a job must agree on: the config less what may differ by node (the preflight compares the
     * contents behind paths) and less what the layout says.
     */
    private static Map<String, Object> sharedSettings(TrainConfig config) {
        Map<String, Object> settings = new LinkedHashMap<>(config.toMap());
        Set<String> perNode = new HashSet<>(NodeFacts.PER_NODE_KEYS);
        perNode.add("dist.nnodes");
        for (String key : perNode) {
            String[] parts = key.split("\\.", 2);
            if (settings.get(parts[0]) instanceof Map<?, ?> section) {
                Map<Object, Object> copy = new LinkedHashMap<>(section);
                copy.remove(parts[1]);
                settings.put(parts[0], copy);
            }
        }
        return settings;
    }
}
