package io.fsdp4j.doctor;

import io.fsdp4j.Version;
import io.fsdp4j.cuda.CublasLt;
import io.fsdp4j.cuda.Cuda;
import io.fsdp4j.cuda.Cudnn;
import io.fsdp4j.cuda.NativeLibraries.Library;
import io.fsdp4j.cuda.NativeLibraries;
import io.fsdp4j.cuda.Nccl;
import io.fsdp4j.cuda.Nvml;
import io.fsdp4j.cuda.Nvrtc;
import io.fsdp4j.model.Flops;
import io.fsdp4j.plan.GpuSpec;
import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.Callable;
import java.util.concurrent.TimeUnit;

/**
 * Examines this machine: every finding goes both into a JSON tree ({@link Examination#json()}) and into lines for
 * people ({@link Examination#lines()}), and problems into the {@link Verdict}. Facts are taken before any test
 * creates a CUDA context, so the memory NVML reports in use belongs to other processes (and the driver).
 */
public final class Doctor {
    private static final double GIB = 1L << 30;
    /** A measured rate below this share of the expected one makes the GPU degraded. */
    static final double DEGRADED_BELOW = 0.7;
    /** Memory held by other processes above this makes the GPU busy. */
    static final long OTHERS_LIMIT = 1L << 30;
    /** The product is wrong when a sampled entry is off by more than this share of the largest one. */
    static final double GEMM_TOLERANCE = 1e-2;

    /**
     * The doctor's conclusion.
     *
     * @param status {@code ok} (GPUs healthy), {@code cpu} (no GPU: the CPU backend), {@code degraded} (a GPU
     *               below its expected rates or held by other processes), {@code failed} (a test failed or gave a
     *               wrong result)
     */
    public record Verdict(String status, String reason) {
        /** 0 for ok and cpu, 1 otherwise. */
        public int exitCode() {
            return status.equals("ok") || status.equals("cpu") ? 0 : 1;
        }
    }

    /** What was found: as JSON, as lines, and the verdict. */
    public record Examination(Map<String, Object> json, List<String> lines, Verdict verdict) {}

    private final Map<String, Object> json = new LinkedHashMap<>();
    private final List<String> lines = new ArrayList<>();
    private final List<String> failures = new ArrayList<>(), degraded = new ArrayList<>();
    private final java.util.Set<String> notes = new java.util.LinkedHashSet<>();

    private Doctor() {}

    /** Examines this machine; {@code healthTests}: run the GPU tests (seconds of GPU time) when there are GPUs. */
    public static Examination examine(boolean healthTests) {
        return new Doctor().run(healthTests);
    }

    private Examination run(boolean healthTests) {
        software();
        List<String> machineGpus = nvml(); // before any CUDA call of ours
        Optional<String> noGpu = NativeLibraries.whyCudaUnavailable();
        libraries();
        Verdict verdict;
        if (noGpu.isPresent()) {
            line("GPUs", "no GPU found: " + noGpu.get());
            json.put("gpus", List.of());
            json.put("no_gpu", noGpu.get());
            int cores = Runtime.getRuntime().availableProcessors();
            verdict = new Verdict("cpu", "no GPU found (see above): jobs run on the CPU backend, " + cores
                    + " core(s), " + gib(Runtime.getRuntime().maxMemory()) + " of heap");
        } else {
            List<String> names = cudaGpus(machineGpus.isEmpty());
            topology();
            if (healthTests) {
                health(names);
            } else {
                notes.add("health tests not run (--no-tests)");
            }
            verdict = !failures.isEmpty() ? new Verdict("failed", String.join("; ", failures))
                    : !degraded.isEmpty() ? new Verdict("degraded", String.join("; ", degraded))
                    : new Verdict("ok", names.size() + " GPU(s) ready for the CUDA backend"
                            + (notes.isEmpty() ? "" : " (" + String.join("; ", notes) + ")"));
        }
        Map<String, Object> v = new LinkedHashMap<>();
        v.put("status", verdict.status());
        v.put("reason", verdict.reason());
        json.put("verdict", v);
        lines.add("");
        lines.add("verdict: " + verdict.status() + ": " + verdict.reason());
        return new Examination(json, List.copyOf(lines), verdict);
    }

    // ---- what is installed --------------------------------------------------------------------------

    private void software() {
        json.put("fsdp4j", Version.current());
        Map<String, Object> java = new LinkedHashMap<>();
        java.put("version", Runtime.version().toString());
        java.put("vendor", System.getProperty("java.vendor"));
        java.put("home", System.getProperty("java.home"));
        json.put("java", java);
        Map<String, Object> cpu = new LinkedHashMap<>();
        cpu.put("os", System.getProperty("os.name") + " " + System.getProperty("os.version") + " "
                + System.getProperty("os.arch"));
        cpu.put("cores", Runtime.getRuntime().availableProcessors());
        cpu.put("max_heap_gib", Runtime.getRuntime().maxMemory() / GIB);
        json.put("cpu", cpu);
        line("fsdp4j", Version.current());
        line("JDK", java.get("version") + " (" + java.get("vendor") + ") at " + java.get("home"));
        line("CPU", cpu.get("cores") + " core(s), " + gib(Runtime.getRuntime().maxMemory()) + " max heap, "
                + cpu.get("os"));
    }

    private void libraries() {
        List<Map<String, Object>> found = new ArrayList<>();
        lines.add("native libraries (search path: " + NativeLibraries.ENV + ", LD_LIBRARY_PATH, CUDA_HOME, system, "
                + "Python wheels):");
        for (Library library : Library.values()) {
            Map<String, Object> entry = new LinkedHashMap<>();
            entry.put("library", library.title());
            var location = NativeLibraries.find(library);
            if (location.isEmpty()) {
                entry.put("path", null);
                entry.put("error", "not found in " + NativeLibraries.searchPath().size() + " folders; set "
                        + NativeLibraries.ENV + " to its folder"
                        + (library == Library.CUDNN ? " (optional: cuDNN's attention engine, attention.kernel)" : ""));
                lines.add(String.format(Locale.ROOT, "  %-14s %s", library.title(), entry.get("error")));
            } else {
                entry.put("path", location.get().toString());
                String version = attempt(() -> versionOf(library));
                entry.put("version", version);
                lines.add(String.format(Locale.ROOT, "  %-14s %s  %s", library.title(), version, location.get()));
            }
            found.add(entry);
        }
        json.put("libraries", found);
    }

    private static String versionOf(Library library) {
        return switch (library) {
            case CUDART -> Cuda.versionString(Cuda.runtimeVersion());
            case DRIVER -> "CUDA " + Cuda.versionString(Cuda.driverVersion());
            case CUBLASLT -> Long.toString(CublasLt.version());
            case NVRTC -> Nvrtc.version().toString();
            case NCCL -> Nccl.versionString(Nccl.version());
            case NVML -> "driver " + Nvml.driverVersion();
            case CUDNN -> Cudnn.versionString(Cudnn.version());
        };
    }

    /** The machine's GPUs as NVML sees them; empty (and said why) when NVML is not there. */
    private List<String> nvml() {
        try {
            Nvml.init();
        } catch (RuntimeException e) {
            json.put("nvml", "not available: " + e.getMessage());
            return List.of();
        }
        try {
            String driver = Nvml.driverVersion();
            json.put("driver", driver);
            line("driver", driver);
            List<Map<String, Object>> gpus = new ArrayList<>();
            List<String> names = new ArrayList<>();
            lines.add("GPUs of this machine (NVML, PCI order; memory before fsdp4j allocates any):");
            long me = ProcessHandle.current().pid();
            for (Nvml.Gpu g : Nvml.gpus()) {
                long others = 0;
                List<Map<String, Object>> procs = new ArrayList<>();
                for (Nvml.GpuProcess p : g.processes()) {
                    if (p.pid() == me) {
                        continue;
                    }
                    others += Math.max(0, p.usedBytes());
                    Map<String, Object> proc = new LinkedHashMap<>();
                    proc.put("pid", p.pid());
                    proc.put("used_gib", p.usedBytes() < 0 ? null : p.usedBytes() / GIB);
                    procs.add(proc);
                }
                Map<String, Object> gpu = new LinkedHashMap<>();
                gpu.put("index", g.index());
                gpu.put("name", g.name());
                gpu.put("memory_total_gib", g.totalBytes() / GIB);
                gpu.put("memory_free_gib", g.freeBytes() / GIB);
                gpu.put("memory_used_gib", g.usedBytes() / GIB);
                gpu.put("other_processes", procs);
                gpu.put("other_processes_gib", others / GIB);
                gpu.put("nvlinks_active", g.nvlinks());
                gpus.add(gpu);
                names.add(g.name());
                lines.add(String.format(Locale.ROOT, "  %d: %s, %s total, %s free, %s in use%s, %d NVLink link(s) active",
                        g.index(), g.name(), gib(g.totalBytes()), gib(g.freeBytes()), gib(g.usedBytes()),
                        procs.isEmpty() ? "" : " (" + procs.size() + " other process(es) hold " + gib(others) + ": pid "
                                + String.join(", ", procs.stream().map(p -> String.valueOf(p.get("pid"))).toList()) + ")",
                        g.nvlinks()));
                if (others > OTHERS_LIMIT) {
                    degraded.add("GPU " + g.index() + " (NVML) has " + gib(others) + " held by other process(es) "
                            + procs.stream().map(p -> String.valueOf(p.get("pid"))).toList()
                            + ": a stale job? stop it or choose other GPUs (CUDA_VISIBLE_DEVICES)");
                }
            }
            json.put("machine_gpus", gpus);
            json.put("memory_source", "NVML");
            return names;
        } catch (RuntimeException e) {
            json.put("nvml", "failed: " + e.getMessage());
            notes.add("NVML failed: " + e.getMessage());
            return List.of();
        } finally {
            attempt(() -> {
                Nvml.shutdown();
                return "";
            });
        }
    }

    /** The GPUs CUDA shows fsdp4j (after CUDA_VISIBLE_DEVICES); their names. */
    private List<String> cudaGpus(boolean memoryFromCuda) {
        int count = Cuda.deviceCount();
        json.put("cuda_visible_devices", System.getenv("CUDA_VISIBLE_DEVICES"));
        lines.add("GPUs fsdp4j will use (CUDA order" + (System.getenv("CUDA_VISIBLE_DEVICES") == null ? ""
                : ", CUDA_VISIBLE_DEVICES=" + System.getenv("CUDA_VISIBLE_DEVICES")) + "):");
        if (memoryFromCuda) {
            json.put("memory_source", "cudaMemGetInfo (NVML not available: processes holding memory are not known)");
            notes.add("NVML not available: memory from cudaMemGetInfo, processes not known");
        }
        List<Map<String, Object>> gpus = new ArrayList<>();
        List<String> names = new ArrayList<>();
        for (int d = 0; d < count; d++) {
            Cuda.DeviceProperties p = Cuda.properties(d);
            Map<String, Object> gpu = new LinkedHashMap<>();
            gpu.put("device", d);
            gpu.put("name", p.name());
            gpu.put("arch", p.arch());
            gpu.put("sms", p.smCount());
            gpu.put("memory_total_gib", p.totalMemory() / GIB);
            String memory = "";
            if (memoryFromCuda) {
                Cuda.setDevice(d);
                Cuda.MemInfo info = Cuda.memGetInfo();
                gpu.put("memory_free_gib", info.free() / GIB);
                memory = ", " + gib(info.free()) + " free (cudaMemGetInfo, after this process's context)";
            }
            gpus.add(gpu);
            names.add(p.name());
            lines.add(String.format(Locale.ROOT, "  %d: %s, %s, %d SMs, %s%s", d, p.name(), p.arch(), p.smCount(),
                    gib(p.totalMemory()), memory));
        }
        json.put("gpus", gpus);
        return names;
    }

    /** {@code nvidia-smi topo -m}, when nvidia-smi is on the PATH. */
    private void topology() {
        try {
            Process p = new ProcessBuilder("nvidia-smi", "topo", "-m").redirectErrorStream(true).start();
            List<String> out = new ArrayList<>();
            try (var reader = new BufferedReader(new InputStreamReader(p.getInputStream(), StandardCharsets.UTF_8))) {
                for (String line; (line = reader.readLine()) != null; ) {
                    if (!line.isBlank()) {
                        out.add(line.stripTrailing());
                    }
                }
            }
            if (!p.waitFor(10, TimeUnit.SECONDS) || p.exitValue() != 0) {
                p.destroyForcibly();
                json.put("topology", "not available: nvidia-smi topo -m failed");
                return;
            }
            json.put("topology", out);
            lines.add("topology (nvidia-smi topo -m):");
            out.forEach(l -> lines.add("  " + l));
        } catch (IOException e) {
            json.put("topology", "not available: nvidia-smi not found");
            line("topology", "not available (nvidia-smi not found; NVLink links per GPU are above when NVML is there)");
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    // ---- health tests -------------------------------------------------------------------------------

    private void health(List<String> names) {
        Map<String, Object> health = new LinkedHashMap<>();
        json.put("health", health);
        lines.add("health tests (as the peer's limits.py: bf16 " + GpuHealth.GEMM + "^3 product, " + gib(GpuHealth.COPY_BYTES)
                + " copy, fp32 all-reduce of 466 MB; 20 timed runs after 3):");
        List<Map<String, Object>> gemms = new ArrayList<>(), copies = new ArrayList<>();
        health.put("gemm", gemms);
        health.put("copy", copies);
        try (var inputs = new GpuHealth.GemmInputs(GpuHealth.GEMM)) {
            for (int d = 0; d < names.size(); d++) {
                GpuSpec spec = specOf(names.get(d));
                Map<String, Object> g = new LinkedHashMap<>();
                g.put("device", d);
                gemms.add(g);
                int device = d;
                try {
                    GpuHealth.Gemm result = GpuHealth.gemm(device, inputs);
                    g.put("tflops", result.flops() / 1e12);
                    g.put("relative_error", result.relativeError());
                    g.put("peak_tflops", Flops.HOPPER_BF16_PEAK / 1e12);
                    g.put("expected_tflops", spec == null ? null : spec.gemmFlops() / 1e12);
                    boolean right = result.relativeError() <= GEMM_TOLERANCE;
                    if (!right) {
                        failures.add(String.format(Locale.ROOT, "GPU %d: the bf16 product is wrong (error %.3g of the "
                                + "largest entry, at most %.0e expected): a faulty GPU or library", d,
                                result.relativeError(), GEMM_TOLERANCE));
                    }
                    String judged = judge("GPU " + d + " bf16 product", result.flops(), spec == null ? 0 : spec.gemmFlops(),
                            1e12, "TFLOP/s");
                    lines.add(String.format(Locale.ROOT, "  GPU %d bf16 product: %.0f TFLOP/s (%.0f%% of the %.0f TFLOP/s "
                                    + "dense peak)%s, sampled entries %s (error %.1e)", d, result.flops() / 1e12,
                            100 * result.flops() / Flops.HOPPER_BF16_PEAK, Flops.HOPPER_BF16_PEAK / 1e12, judged,
                            right ? "right" : "WRONG", result.relativeError()));
                } catch (RuntimeException e) {
                    g.put("error", e.getMessage());
                    failures.add("GPU " + d + ": the bf16 product failed: " + e.getMessage());
                    lines.add("  GPU " + d + " bf16 product: FAILED: " + e.getMessage());
                }
                Map<String, Object> c = new LinkedHashMap<>();
                c.put("device", d);
                copies.add(c);
                try {
                    long bytes = copyBytes(device);
                    double rate = GpuHealth.copy(device, bytes);
                    c.put("bytes", bytes);
                    c.put("tb_s", rate / 1e12);
                    c.put("expected_tb_s", spec == null ? null : spec.hbmBytesPerSecond() / 1e12);
                    String judged = judge("GPU " + d + " copy bandwidth", rate, spec == null ? 0 : spec.hbmBytesPerSecond(),
                            1e12, "TB/s");
                    lines.add(String.format(Locale.ROOT, "  GPU %d device copy: %.2f TB/s (read + written)%s", d,
                            rate / 1e12, judged));
                } catch (RuntimeException e) {
                    c.put("error", e.getMessage());
                    failures.add("GPU " + d + ": the device copy failed: " + e.getMessage());
                    lines.add("  GPU " + d + " device copy: FAILED: " + e.getMessage());
                }
            }
        }
        if (names.size() < 2) {
            health.put("all_reduce", null);
            lines.add("  all-reduce: one GPU, nothing to test");
            return;
        }
        Map<String, Object> a = new LinkedHashMap<>();
        health.put("all_reduce", a);
        a.put("gpus", names.size());
        a.put("bytes", GpuHealth.ALL_REDUCE_FLOATS * 4);
        try {
            double busBw = GpuHealth.allReduce(names.size(), GpuHealth.ALL_REDUCE_FLOATS);
            GpuSpec spec = specOf(names.getFirst());
            a.put("bus_gb_s", busBw / 1e9);
            a.put("expected_bus_gb_s", spec == null ? null : spec.allReduceBusBw() / 1e9);
            String judged = judge("all-reduce across " + names.size() + " GPUs", busBw,
                    spec == null ? 0 : spec.allReduceBusBw(), 1e9, "GB/s");
            lines.add(String.format(Locale.ROOT, "  all-reduce across %d GPUs: %.0f GB/s bus bandwidth (%.2f ms), sums "
                    + "right%s", names.size(), busBw / 1e9, GpuHealth.ALL_REDUCE_FLOATS * 4.0 * 2 * (names.size() - 1)
                    / names.size() / busBw * 1e3, judged));
        } catch (RuntimeException e) {
            a.put("error", e.getMessage());
            failures.add("all-reduce across " + names.size() + " GPUs failed: " + e.getMessage());
            lines.add("  all-reduce: FAILED: " + e.getMessage());
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            failures.add("all-reduce interrupted");
        }
    }

    /** ", expected about X" and a degradation when the rate is well below it; "" when nothing is expected. */
    private String judge(String what, double rate, double expected, double unit, String units) {
        if (expected <= 0) {
            notes.add("no reference rates for this GPU model: its rates are not judged");
            return " (no reference for this GPU)";
        }
        double share = rate / expected;
        if (share < DEGRADED_BELOW) {
            degraded.add(String.format(Locale.ROOT, "%s %.2f %s is %.0f%% of the %.2f %s expected", what, rate / unit,
                    units, 100 * share, expected / unit, units));
            return String.format(Locale.ROOT, " DEGRADED: %.0f%% of the %.2f %s expected", 100 * share, expected / unit,
                    units);
        }
        return String.format(Locale.ROOT, ", %.0f%% of the %.2f %s expected", 100 * share, expected / unit, units);
    }

    /** The copy size: 2 GiB (as limits.py), less when the GPU has not twice that free. */
    private static long copyBytes(int device) {
        Cuda.setDevice(device);
        long free = Cuda.memGetInfo().free();
        return Math.min(GpuHealth.COPY_BYTES, Math.max(1L << 20, free / 3 / 4096 * 4096));
    }

    /** The measured figures fsdp4j's planner holds for this GPU, when it knows the model. */
    static GpuSpec specOf(String name) {
        String n = name.toUpperCase(Locale.ROOT);
        return n.contains("H200") ? GpuSpec.h200() : n.contains("H100") ? GpuSpec.h100() : null;
    }

    // ---- helpers ------------------------------------------------------------------------------------

    private void line(String label, String value) {
        lines.add(String.format(Locale.ROOT, "%-9s %s", label + ":", value));
    }

    static String gib(double bytes) {
        return String.format(Locale.ROOT, "%.1f GiB", bytes / GIB);
    }

    private static String attempt(Callable<String> probe) {
        try {
            return probe.call();
        } catch (Throwable t) {
            return "version unknown (" + (t.getMessage() == null ? t.toString() : t.getMessage()) + ")";
        }
    }
}
