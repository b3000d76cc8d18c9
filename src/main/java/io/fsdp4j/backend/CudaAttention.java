package io.fsdp4j.backend;

import io.fsdp4j.UserError;
import io.fsdp4j.config.AttentionKernel;
import io.fsdp4j.config.AttentionSection;
import io.fsdp4j.cuda.Cuda;
import io.fsdp4j.cuda.Cudnn;
import io.fsdp4j.cuda.CudnnAttention;
import io.fsdp4j.cuda.NativeLibraries;
import io.fsdp4j.tensor.DType;
import io.fsdp4j.tensor.Tensor;
import java.util.HashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.function.Consumer;
import java.util.function.UnaryOperator;

/**
 * Which engine computes a {@link CudaBackend}'s attention, shape by shape ({@code attention.kernel}): fsdp4j's kernels
 * or cuDNN's fused flash attention ({@link CudnnAttention}). Both keep the same tensors in the same meaning (out
 * [B, T, NH HS], and lse [B, NH, T] fp32 = the natural log-sum-exp of each query row's scaled scores: cuDNN's softmax
 * statistics, and what attention_sm90.cu writes as (max + log2 sum) ln 2), so a backward on either engine takes a
 * forward of either, and the forward and the backward of a shape are chosen apart ({@link Choice}): its forward, and an
 * activation checkpoint's recomputed forward, on one engine, its backward on one.
 *
 * <ul>
 *   <li>{@code fsdp4j}: always fsdp4j's kernels.</li>
 *   <li>{@code cudnn}: cuDNN for every call; a call cuDNN cannot take ({@link #cudnnRejects}, or a shape it builds no
 *       plan for) is a {@link UserError}.</li>
 *   <li>{@code auto}: the first call of a shape cuDNN can take times both engines on the device (forwards and
 *       backwards apart, after one of each to warm up, queued behind memsets so that the device's time is measured,
 *       not the host's launching; in two rounds, the engines taking turns, the lesser time of each kept) and keeps
 *       the faster for each direction, with one line saying which for each and
 *       the four times; other calls run on fsdp4j's kernels.</li>
 * </ul>
 *
 * <p>Ranks of one job must pick alike (the same numerics on every rank, run after run). A rank's measurement at first
 * use is its own, so a job of several ranks settles its training shapes before the first step instead ({@link
 * #settle}: every rank times them, the times are summed over the ranks, and each rank keeps the engine with the smaller
 * sum, direction by direction, which is the same everywhere); from then on a shape that was not settled runs on
 * fsdp4j's kernels, the rule that needs no measurement. A lone rank (a single-GPU run, a tool, a test) measures at
 * first use. A backend nobody sets ({@link #use}) runs fsdp4j's kernels; training sets {@code attention.kernel} (auto
 * by default).
 */
public final class CudaAttention implements AutoCloseable {

    /** An engine. */
    public enum Engine { FSDP4J, CUDNN }

    /** The engines of one shape: of its forwards (an activation checkpoint's recomputed one too) and its backwards. */
    public record Choice(Engine forward, Engine backward) {
        static final Choice FSDP4J = new Choice(Engine.FSDP4J, Engine.FSDP4J);
        static final Choice CUDNN = new Choice(Engine.CUDNN, Engine.CUDNN);

        /** The engine of one direction. */
        public Engine of(boolean backward) {
            return backward ? this.backward : forward;
        }
    }

    /**
     * One shape's times, ms a call (NaN where not measured): each engine's forward and backward. The array form
     * ({@link #toArray}) is what {@link #settle} sums over the ranks.
     */
    record Times(double fsdp4jForward, double fsdp4jBackward, double cudnnForward, double cudnnBackward) {
        static final Times NONE = new Times(Double.NaN, Double.NaN, Double.NaN, Double.NaN);

        double[] toArray() {
            return new double[] {fsdp4jForward, fsdp4jBackward, cudnnForward, cudnnBackward};
        }

        static Times of(double[] ms) {
            return new Times(ms[0], ms[1], ms[2], ms[3]);
        }
    }

    /** Forward and backward repetitions timed for each engine (after one of each to warm up). */
    static final int TIMED_REPS = 2;
    /** Timings of a direction, each of TIMED_REPS calls queued behind the blocker; the smallest is kept. */
    private static final int TIMINGS = 3;
    /** Bytes each memset of the blocker that timed calls queue behind writes (about 10 us on an H100 or H200). */
    private static final long BLOCKER_BYTES = 32L << 20;
    /** The most memsets the timed calls queue behind (about 5 ms of the device's time). */
    private static final int MAX_BLOCKING_MEMSETS = 512;

    private final CudaBackend backend;
    private final Map<AttentionShape, Choice> chosen = new HashMap<>();
    private Consumer<String> log;
    private AttentionKernel kernel = AttentionKernel.FSDP4J;
    private boolean deterministic;
    private boolean settled;
    private CudnnAttention cudnn;

    CudaAttention(CudaBackend backend, Consumer<String> log) {
        this.backend = backend;
        this.log = log;
    }

    /** Where the lines saying what auto picked go (standard error, "fsdp4j: ..." by default). */
    public synchronized void reportTo(Consumer<String> log) {
        this.log = log;
    }

    /**
     * The engine choice ({@code attention.kernel}; a backend nobody sets runs fsdp4j's kernels, and training sets
     * the config's, auto by default); {@code cudnn} without libcudnn.so.9 is a {@link UserError}.
     */
    public synchronized void use(AttentionKernel kernel) {
        use(kernel, false);
    }

    /**
     * {@link #use(AttentionKernel)} with {@code attention.deterministic}: where true, every backward runs on fsdp4j's
     * two backward kernels (dq summed in a fixed order; auto keeps choosing the forwards), and {@code cudnn} is a
     * {@link UserError} (its backward adds in no fixed order).
     */
    public synchronized void use(AttentionKernel kernel, boolean deterministic) {
        requireCudnnFor(kernel, Cudnn.found());
        AttentionSection.requireDeterministicEngine(kernel, deterministic);
        this.kernel = kernel;
        this.deterministic = deterministic;
        backend.attentionKernels().deterministic(deterministic);
        chosen.clear();
        settled = false;
    }

    /** The error of {@code attention.kernel: cudnn} where libcudnn.so.9 is not {@code found}. */
    static void requireCudnnFor(AttentionKernel kernel, boolean found) {
        if (kernel == AttentionKernel.CUDNN && !found) {
            throw new UserError("attention.kernel is cudnn, but libcudnn.so.9 (cuDNN 9) is not found: install cuDNN 9 "
                    + "(pip install nvidia-cudnn-cu13, or the distro's libcudnn9) or set " + NativeLibraries.ENV
                    + " to its folder, or set attention.kernel: auto");
        }
    }

    public synchronized AttentionKernel kernel() {
        return kernel;
    }

    /** The engines chosen for {@code s} so far, or null. */
    public synchronized Choice chosen(AttentionShape s) {
        return chosen.get(s);
    }

    /**
     * Why cuDNN's engine cannot take a call of shape {@code s} (its qkv {@code qkv}, documents {@code documentStarts}),
     * or null when it can, as far as can be told without cuDNN: the grouped layout without ALiBi or a soft cap, no
     * packed documents, bf16 tensors whose heads start at 16-byte boundaries.
     */
    public static String cudnnRejects(AttentionShape s, Tensor documentStarts, DType dtype, long qkvAddress) {
        if (documentStarts != null) {
            return "packed documents";
        }
        if (s.layout() != AttentionShape.QkvLayout.GROUPED || s.alibi()) {
            return "BLOOM's per-head layout and ALiBi";
        }
        if (s.softcap() > 0) {
            return "soft-capped scores";
        }
        if (dtype != DType.BF16) {
            return dtype + " activations (it takes bf16)";
        }
        if (s.headDim() % 8 != 0 || qkvAddress % 16 != 0) {
            return "heads not on 16-byte boundaries";
        }
        return null;
    }

    /** cuDNN's shape for an attention shape it can take. */
    static CudnnAttention.Shape cudnnShape(AttentionShape s) {
        return new CudnnAttention.Shape(s.batch(), s.seqLen(), s.heads(), s.kvHeads(), s.headDim(), s.slidingWindow(),
                s.scale());
    }

    /**
     * The engine of {@code kernel} for one direction of a shape with the given times (ms; NaN where not measured),
     * {@code rejected} the reason cuDNN cannot take it (null: it can): the faster under auto, fsdp4j's kernels on a tie
     * or without both times.
     */
    static Engine pick(AttentionKernel kernel, String rejected, double fsdp4jMs, double cudnnMs) {
        return switch (kernel) {
            case FSDP4J -> Engine.FSDP4J;
            case CUDNN -> Engine.CUDNN;
            case AUTO -> rejected == null && cudnnMs < fsdp4jMs ? Engine.CUDNN : Engine.FSDP4J;
        };
    }

    /** Each direction's engine of {@code kernel} for a shape with the times {@code ms}: {@link #pick} twice. */
    static Choice choose(AttentionKernel kernel, String rejected, Times ms) {
        return choose(kernel, rejected, ms, false);
    }

    /** {@link #choose(AttentionKernel, String, Times)}; {@code deterministic}: the backward fsdp4j's whatever the times. */
    static Choice choose(AttentionKernel kernel, String rejected, Times ms, boolean deterministic) {
        return new Choice(pick(kernel, rejected, ms.fsdp4jForward(), ms.cudnnForward()),
                deterministic ? Engine.FSDP4J : pick(kernel, rejected, ms.fsdp4jBackward(), ms.cudnnBackward()));
    }

    /** The engine for this call ({@code backward}: of a backward): decided at the shape's first call (timing both). */
    synchronized Engine engineFor(Tensor qkv, Tensor documentStarts, AttentionShape s, boolean backward) {
        return choiceFor(qkv, documentStarts, s).of(backward);
    }

    private Choice choiceFor(Tensor qkv, Tensor documentStarts, AttentionShape s) {
        if (kernel == AttentionKernel.FSDP4J) {
            return Choice.FSDP4J;
        }
        String rejected = cudnnRejects(s, documentStarts, qkv.dtype(), CudaBackend.ptr(qkv));
        if (rejected == null) {
            rejected = cudnnCannotRun(s);
        }
        if (kernel == AttentionKernel.CUDNN) {
            if (rejected != null) {
                throw new UserError("attention.kernel is cudnn, but cuDNN cannot run " + describe(s) + ": "
                        + rejected + "; set attention.kernel: auto (fsdp4j's kernels take what cuDNN cannot)");
            }
            return Choice.CUDNN;
        }
        if (rejected != null) {
            return Choice.FSDP4J; // no choice to make, and none to remember: the reason may differ call to call
        }
        Choice choice = chosen.get(s);
        if (choice == null) {
            if (settled) {
                choice = Choice.FSDP4J; // not settled across the ranks: the rule
            } else {
                Times ms = time(s, qkv);
                choice = choose(kernel, null, ms, deterministic);
                log.accept(line(s, choice, ms, deterministic ? " (attention.deterministic)" : ""));
            }
            chosen.put(s, choice);
        }
        return choice;
    }

    /**
     * Settles the engine of each of {@code shapes} alike on every rank of a job, before its first step: each rank
     * times both engines (on scratch tensors) where cuDNN can run the shape, {@code sumOverRanks} adds the times
     * (forward and backward of each engine, and a count of ranks where cuDNN cannot) over the ranks, and for each
     * direction the engine with the smaller sum is kept. Shapes not settled here then run on fsdp4j's kernels. Every
     * rank must call this with the same shapes; a no-op unless {@code attention.kernel} is auto. {@code report}:
     * whether this rank logs the choices (one rank of a job does).
     */
    public synchronized void settle(List<AttentionShape> shapes, UnaryOperator<double[]> sumOverRanks,
                                    boolean report) {
        if (kernel != AttentionKernel.AUTO) {
            return;
        }
        settled = true;
        for (AttentionShape s : shapes) {
            double[] mine = {0, 0, 0, 0, 1};
            String rejected = cudnnRejects(s, null, DType.BF16, 0);
            if (rejected == null) {
                rejected = cudnnCannotRun(s);
            }
            if (rejected == null) {
                try (MemoryScope scratch = backend.newScope(); var entered = scratch.enter()) {
                    Tensor qkv = backend.allocate(DType.BF16, s.batch(), s.seqLen(), s.qkvWidth());
                    mine = java.util.Arrays.copyOf(time(s, qkv).toArray(), 5);
                }
            }
            double[] all = sumOverRanks.apply(mine);
            Times sums = Times.of(all);
            Choice choice = choose(kernel, all[4] > 0 ? "not on every rank" : null, sums, deterministic);
            chosen.put(s, choice);
            if (report) {
                String where = all[4] > 0 ? " (cuDNN cannot run it on " + (int) all[4] + " rank(s))"
                        : " (summed over the ranks)";
                log.accept(line(s, choice, sums, where + (deterministic ? " (attention.deterministic)" : "")));
            }
        }
    }

    /**
     * Why cuDNN itself cannot run {@code s} here (no library, a library that does not load or start, no plan for the
     * shape), or null when it can; the plans are built once per shape.
     */
    private String cudnnCannotRun(AttentionShape s) {
        if (!Cudnn.found()) {
            return "libcudnn.so.9 not found";
        }
        try {
            return cudnn().unsupported(cudnnShape(s)).orElse(null);
        } catch (UserError | io.fsdp4j.cuda.CudaException e) { // found but not loadable, or no handle
            return "cuDNN did not start: " + e.getMessage();
        }
    }

    /** The two engines' times of a forward and of a backward of {@code s}, ms. */
    private Times time(AttentionShape s, Tensor qkv) {
        try (MemoryScope scratch = backend.newScope(); var entered = scratch.enter()) {
            // scratch outputs: a call's own are left as they are
            Tensor out = backend.allocateForWrite(DType.BF16, s.batch(), s.seqLen(), s.heads() * s.headDim());
            Tensor lse = backend.allocateForWrite(DType.F32, s.batch(), s.heads(), s.seqLen());
            Tensor dQkv = backend.allocateForWrite(qkv.dtype(), s.batch(), s.seqLen(), s.qkvWidth());
            // out serves as dOut: any values in range do; each backward takes its own engine's forward's out and lse
            Runnable oursForward = () -> backend.attentionKernels().forward(out, lse, qkv, null, s);
            Runnable oursBackward = () -> backend.attentionKernels().backward(dQkv, out, qkv, out, lse, null, s);
            Runnable theirsForward = () -> cudnnForward(out, lse, qkv, s);
            Runnable theirsBackward = () -> cudnnBackward(dQkv, out, qkv, out, lse, s);
            double[] ours = elapsedMs(oursForward, oursBackward), theirs = elapsedMs(theirsForward, theirsBackward);
            // a second round, each engine after the other has run: the first timed can meet a device still raising
            // its clocks after the host's start-up (Qwen2.5-7B at 2048 tokens on an H200: fsdp4j's forward timed
            // 0.122 ms first, 0.069 otherwise, and auto picked cuDNN's 0.072 in two runs of four)
            double[] ours2 = elapsedMs(oursForward, oursBackward), theirs2 = elapsedMs(theirsForward, theirsBackward);
            return new Times(Math.min(ours[0], ours2[0]), Math.min(ours[1], ours2[1]), Math.min(theirs[0], theirs2[0]),
                    Math.min(theirs[1], theirs2[1]));
        }
    }

    /**
     * ms a call of {@code forward}, then of {@code backward}, after one of each to warm up: the device's time of the
     * calls alone. Each direction's timed calls are queued behind memsets that keep the device busy while the host
     * queues them, so that the events around them time the kernels, not the host's launching (cuDNN's calls cost the
     * host tens of microseconds, a short forward less than that on the device: timed as they were queued, the first
     * use of a short shape measured the host). If the host was still queuing when the memsets ended, the direction is
     * timed again behind twice as many.
     */
    private double[] elapsedMs(Runnable forward, Runnable backward) {
        forward.run(); // warm-up (and cuDNN's first launch of each plan)
        backward.run();
        try (MemoryScope scratch = backend.newScope(); var entered = scratch.enter()) {
            long blocker = CudaBackend.ptr(backend.allocateForWrite(DType.I32, (int) (BLOCKER_BYTES / 4)));
            return new double[] {queuedMs(forward, blocker), queuedMs(backward, blocker)};
        }
    }

    /**
     * ms a call of {@code op}: the least of {@link #TIMINGS} timings of TIMED_REPS calls queued behind memsets of
     * {@code blocker} ({@link #elapsedMs}). A timing can only come out long (a stall of the device or the host):
     * at 512 tokens on an H200 single timings came out 0.1 ms long, eight times a short forward's time.
     */
    private double queuedMs(Runnable op, long blocker) {
        double least = Double.POSITIVE_INFINITY;
        for (int t = 0; t < TIMINGS; t++) {
            least = Math.min(least, queuedOnceMs(op, blocker));
        }
        return least;
    }

    /** ms a call of {@code op}, TIMED_REPS calls queued behind memsets of {@code blocker}. */
    private double queuedOnceMs(Runnable op, long blocker) {
        long stream = backend.stream();
        long before = Cuda.eventCreate(true), start = Cuda.eventCreate(true), end = Cuda.eventCreate(true);
        try {
            for (int memsets = 8; ; memsets *= 2) {
                Cuda.eventRecord(before, stream);
                for (int i = 0; i < memsets; i++) {
                    Cuda.memsetAsync(blocker, i & 0xff, BLOCKER_BYTES, stream);
                }
                Cuda.eventRecord(start, stream);
                long queuing = System.nanoTime();
                for (int i = 0; i < TIMED_REPS; i++) {
                    op.run();
                }
                double queuedMs = (System.nanoTime() - queuing) / 1e6;
                Cuda.eventRecord(end, stream);
                Cuda.eventSynchronize(end);
                boolean hostBound = queuedMs > Cuda.eventElapsedMs(before, start);
                if (!hostBound || memsets >= MAX_BLOCKING_MEMSETS) {
                    return Cuda.eventElapsedMs(start, end) / TIMED_REPS;
                }
            }
        } finally {
            Cuda.eventDestroy(before);
            Cuda.eventDestroy(start);
            Cuda.eventDestroy(end);
        }
    }

    void cudnnForward(Tensor out, Tensor lse, Tensor qkv, AttentionShape s) {
        CudnnAttention.Shape shape = cudnnShape(s);
        try (MemoryScope scratch = backend.newScope(); var entered = scratch.enter()) {
            Tensor workspace = workspace(cudnn().forwardWorkspaceBytes(shape));
            cudnn().forward(CudaBackend.ptr(out), CudaBackend.ptr(lse), CudaBackend.ptr(qkv), shape, backend.stream(),
                    CudaBackend.ptr(workspace));
        }
    }

    void cudnnBackward(Tensor dQkv, Tensor dOut, Tensor qkv, Tensor out, Tensor lse, AttentionShape s) {
        CudnnAttention.Shape shape = cudnnShape(s);
        try (MemoryScope scratch = backend.newScope(); var entered = scratch.enter()) {
            Tensor workspace = workspace(cudnn().backwardWorkspaceBytes(shape));
            cudnn().backward(CudaBackend.ptr(dQkv), CudaBackend.ptr(dOut), CudaBackend.ptr(qkv), CudaBackend.ptr(out),
                    CudaBackend.ptr(lse), shape, backend.stream(), CudaBackend.ptr(workspace));
        }
    }

    /** A workspace of at least {@code bytes}, from the backend's allocator, freed with the entered scope. */
    private Tensor workspace(long bytes) {
        int row = 4096;
        return backend.allocateForWrite(DType.F32, Math.toIntExact((bytes + 4L * row - 1) / (4L * row)), row);
    }

    private CudnnAttention cudnn() {
        if (cudnn == null) {
            Cuda.setDevice(backend.device());
            cudnn = new CudnnAttention();
        }
        return cudnn;
    }

    private static String describe(AttentionShape s) {
        return "attention B=" + s.batch() + " T=" + s.seqLen() + " NH=" + s.heads() + " NKV=" + s.kvHeads() + " HS="
                + s.headDim() + (s.slidingWindow() > 0 ? " window=" + s.slidingWindow() : "");
    }

    /** The log line of a choice: which engine for each direction, and the four times. */
    static String line(AttentionShape s, Choice choice, Times ms, String note) {
        return String.format(Locale.ROOT, "%s: forward %s (%.3f ms on cuDNN, %.3f ms on fsdp4j's kernels), backward %s "
                        + "(%.3f ms on cuDNN, %.3f ms on fsdp4j's kernels)%s", describe(s), name(choice.forward()),
                ms.cudnnForward(), ms.fsdp4jForward(), name(choice.backward()), ms.cudnnBackward(),
                ms.fsdp4jBackward(), note);
    }

    private static String name(Engine engine) {
        return engine == Engine.CUDNN ? "cudnn" : "fsdp4j";
    }

    @Override
    public synchronized void close() {
        if (cudnn != null) {
            cudnn.close();
            cudnn = null;
        }
    }
}
