package io.fsdp4j.cuda;

import io.fsdp4j.UserError;
import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.SymbolLookup;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.MethodHandle;
import java.nio.file.DirectoryStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.ConcurrentHashMap;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Stream;

/**
 * Finds and loads the CUDA libraries on a search path, in this order:
 * <ol>
 *   <li>the folders of the system property {@code fsdp4j.cuda.libs}, then of the variable {@code FSDP4J_CUDA_LIBS}
 *       (colon-separated); a library found there is always the one taken;</li>
 *   <li>{@code LD_LIBRARY_PATH}; {@code CUDA_HOME}, {@code CUDA_PATH} ({@code lib64}, {@code lib});
 *       {@code /usr/local/cuda/lib64}, {@code /usr/local/cuda-*}{@code /lib64} (newest first);</li>
 *   <li>system folders ({@code /usr/lib/x86_64-linux-gnu}, {@code /usr/lib64}, {@code /lib/x86_64-linux-gnu},
 *       {@code /usr/local/nvidia/lib64}, ...);</li>
 *   <li>the {@code nvidia/*}{@code /lib} folders of Python installs (virtual environments under {@code /opt},
 *       {@code VIRTUAL_ENV}, {@code CONDA_PREFIX}, the system's and the user's site-packages);</li>
 *   <li>last, the system loader by bare name ({@code ld.so.cache}), which is where the driver usually is.</li>
 * </ol>
 * The first folder holding the library wins, except for NCCL, where the newest version found wins (outside the
 * override folders). A library that is missing is a {@link UserError} of one line that names it, the folders
 * searched and the variable to set.
 */
@SuppressWarnings("restricted") // the native layer: loading libraries and making downcalls is its job
public final class NativeLibraries {

    /** The libraries fsdp4j calls, each with the file names tried in order. */
    public enum Library {
        CUDART("CUDA runtime", "libcudart.so.13", "libcudart.so"),
        DRIVER("NVIDIA driver", "libcuda.so.1"),
        CUBLASLT("cuBLASLt", "libcublasLt.so.13"),
        NVRTC("NVRTC", "libnvrtc.so.13"),
        NCCL("NCCL", "libnccl.so.2"),
        CUDNN("cuDNN", "libcudnn.so.9"),
        NVML("NVML", "libnvidia-ml.so.1");

        private final String title;
        private final List<String> fileNames;

        Library(String title, String... fileNames) {
            this.title = title;
            this.fileNames = List.of(fileNames);
        }

        public String title() {
            return title;
        }

        public List<String> fileNames() {
            return fileNames;
        }
    }

    /** Where a library was found: a file, or {@code null} when the system loader found it by name. */
    public record Location(Library library, Path file, String loaderName) {
        @Override
        public String toString() {
            return file != null ? file.toString() : loaderName + " (system loader)";
        }
    }

    /** The variable naming extra folders to search first. */
    public static final String ENV = "FSDP4J_CUDA_LIBS";
    /** The system property naming extra folders to search first (before the variable). */
    public static final String PROPERTY = "fsdp4j.cuda.libs";

    private static final Map<Library, Location> FOUND = new ConcurrentHashMap<>();
    private static final Map<Library, SymbolLookup> LOADED = new ConcurrentHashMap<>();
    private static volatile Optional<String> unavailable;

    private NativeLibraries() {}

    // ---- finding ------------------------------------------------------------------------------------

    /** The override folders ({@link #PROPERTY}, then {@link #ENV}), in order. */
    public static List<Path> overrideFolders() {
        var folders = new ArrayList<Path>();
        splitInto(folders, System.getProperty(PROPERTY));
        splitInto(folders, System.getenv(ENV));
        return folders;
    }

    /** Every folder searched, overrides first, existing folders only, without repeats. */
    public static List<Path> searchPath() {
        var folders = new LinkedHashSet<Path>();
        folders.addAll(existing(overrideFolders()));
        folders.addAll(existing(defaultFolders()));
        return List.copyOf(folders);
    }

    private static List<Path> defaultFolders() {
        var folders = new ArrayList<Path>();
        splitInto(folders, System.getenv("LD_LIBRARY_PATH"));
        for (String variable : List.of("CUDA_HOME", "CUDA_PATH")) {
            String home = System.getenv(variable);
            if (home != null && !home.isBlank()) {
                folders.add(Path.of(home, "lib64"));
                folders.add(Path.of(home, "lib"));
            }
        }
        folders.add(Path.of("/usr/local/cuda/lib64"));
        folders.addAll(glob("/usr/local/cuda-*/lib64"));
        folders.add(Path.of("/usr/local/cuda/targets/x86_64-linux/lib"));
        for (String system : List.of("/usr/lib/x86_64-linux-gnu", "/usr/lib64", "/lib/x86_64-linux-gnu", "/lib64",
                "/usr/lib", "/usr/local/nvidia/lib64", "/usr/local/nvidia/lib", "/usr/lib/wsl/lib")) {
            folders.add(Path.of(system));
        }
        // Python wheels (nvidia-cuda-runtime, nvidia-cublas, nvidia-nccl, ...) put each library in nvidia/*/lib
        var sitePackages = new ArrayList<String>();
        for (String variable : List.of("VIRTUAL_ENV", "CONDA_PREFIX")) {
            String prefix = System.getenv(variable);
            if (prefix != null && !prefix.isBlank()) {
                sitePackages.add(prefix + "/lib/python3*/site-packages");
                if (variable.equals("CONDA_PREFIX")) {
                    folders.add(Path.of(prefix, "lib"));
                }
            }
        }
        sitePackages.addAll(List.of(
                "/opt/*/.venv/lib/python3*/site-packages",
                "/opt/*/venv/lib/python3*/site-packages",
                "/opt/conda/lib/python3*/site-packages",
                "/usr/local/lib/python3*/dist-packages",
                "/usr/local/lib/python3*/site-packages",
                "/usr/lib/python3*/site-packages",
                "/usr/lib/python3/dist-packages"));
        String home = System.getProperty("user.home");
        if (home != null) {
            sitePackages.add(home + "/.local/lib/python3*/site-packages");
        }
        for (String site : sitePackages) {
            folders.addAll(glob(site + "/nvidia/*/lib"));
        }
        return folders;
    }

    /** Where {@code library} is, without loading it; empty when it is nowhere on the search path. */
    public static Optional<Location> find(Library library) {
        Location found = FOUND.get(library);
        if (found != null) {
            return Optional.of(found);
        }
        Optional<Location> location = search(library);
        location.ifPresent(l -> FOUND.put(library, l));
        return location;
    }

    static Optional<Location> search(Library library) {
        for (Path folder : existing(overrideFolders())) {
            Optional<Path> file = fileIn(folder, library);
            if (file.isPresent()) {
                return Optional.of(new Location(library, file.get(), null));
            }
        }
        var candidates = new ArrayList<Path>();
        for (Path folder : searchPath()) {
            fileIn(folder, library).ifPresent(candidates::add);
        }
        if (library == Library.NCCL && candidates.size() > 1) {
            // several NCCLs (a wheel and a distro package, say): the newest, the first one among equals
            Path newest = candidates.stream()
                    .max(Comparator.comparingInt(NativeLibraries::ncclVersionOf)
                            .thenComparing(Comparator.comparingInt(candidates::indexOf).reversed()))
                    .orElseThrow();
            return Optional.of(new Location(library, newest, null));
        }
        if (!candidates.isEmpty()) {
            return Optional.of(new Location(library, candidates.getFirst(), null));
        }
        for (String name : library.fileNames()) {
            if (loadableByName(name)) {
                return Optional.of(new Location(library, null, name));
            }
        }
        return Optional.empty();
    }

    private static Optional<Path> fileIn(Path folder, Library library) {
        for (String name : library.fileNames()) {
            Path file = folder.resolve(name);
            if (Files.isRegularFile(file)) {
                return Optional.of(file);
            }
        }
        return Optional.empty();
    }

    private static boolean loadableByName(String name) {
        try (Arena arena = Arena.ofConfined()) {
            SymbolLookup.libraryLookup(name, arena);
            return true;
        } catch (IllegalArgumentException | IllegalCallerException notThere) {
            return false;
        }
    }

    // ---- loading ------------------------------------------------------------------------------------

    /** The symbols of {@code library}, loading it on first use; a {@link UserError} when it cannot be found. */
    public static SymbolLookup lookup(Library library) {
        SymbolLookup loaded = LOADED.get(library);
        if (loaded != null) {
            return loaded;
        }
        synchronized (LOADED) {
            return LOADED.computeIfAbsent(library, NativeLibraries::load);
        }
    }

    /** Where {@code library} is, or a {@link UserError} naming what was searched and what to set. */
    public static Location require(Library library) {
        return find(library).orElseThrow(() -> new UserError(missingMessage(library)));
    }

    private static SymbolLookup load(Library library) {
        Location location = require(library);
        try {
            if (location.file() == null) {
                return SymbolLookup.libraryLookup(location.loaderName(), Arena.global());
            }
            if (library == Library.NVRTC) {
                preloadNvrtcBuiltins(location.file().getParent());
            }
            if (library == Library.CUDNN) {
                preloadCudnnParts(location.file().getParent());
            }
            return SymbolLookup.libraryLookup(location.file(), Arena.global());
        } catch (IllegalArgumentException e) {
            throw new UserError("found " + library.fileNames().getFirst() + " (" + library.title() + ") at " + location
                    + " but could not load it (" + e.getMessage() + "); set " + ENV
                    + " to a folder holding a working copy");
        }
    }

    /** NVRTC opens libnvrtc-builtins by name; loading it first from the same folder lets that name resolve. */
    private static void preloadNvrtcBuiltins(Path folder) {
        try (DirectoryStream<Path> files = Files.newDirectoryStream(folder, "libnvrtc-builtins.so*")) {
            for (Path file : files) {
                try {
                    SymbolLookup.libraryLookup(file, Arena.global());
                    return;
                } catch (IllegalArgumentException ignored) {
                    // try the next; NVRTC reports a missing builtins library itself
                }
            }
        } catch (IOException ignored) {
            // the folder is unreadable: NVRTC reports it
        }
    }

    /**
     * cuDNN 9's libcudnn.so.9 opens its parts (libcudnn_graph.so.9, the engines, ...) by name; loading them first
     * from its folder lets those names resolve where the folder is not on the loader's path (a Python wheel's
     * nvidia/cudnn/lib). In dependency order; a part that does not load is left to cuDNN to report.
     */
    private static void preloadCudnnParts(Path folder) {
        for (String part : List.of("graph", "ops", "heuristic", "engines_precompiled", "engines_runtime_compiled",
                "engines_tensor_ir", "cnn", "adv")) {
            Path file = folder.resolve("libcudnn_" + part + ".so.9");
            if (Files.isRegularFile(file)) {
                try {
                    SymbolLookup.libraryLookup(file, Arena.global());
                } catch (IllegalArgumentException ignored) {
                    // cuDNN says what it misses when it needs it
                }
            }
        }
    }

    /** The one-line message for a library that is nowhere on the search path. */
    static String missingMessage(Library library) {
        List<Path> searched = searchPath();
        var shown = new StringBuilder();
        int limit = 6;
        for (int i = 0; i < Math.min(limit, searched.size()); i++) {
            shown.append(i == 0 ? "" : ", ").append(searched.get(i));
        }
        if (searched.size() > limit) {
            shown.append(", and ").append(searched.size() - limit).append(" more");
        }
        if (searched.isEmpty()) {
            shown.append("none of the usual folders exist");
        }
        return "cannot find " + String.join(" or ", library.fileNames()) + " (" + library.title() + ") in "
                + searched.size() + " folders (" + shown + ") nor through the system loader; set " + ENV
                + " to the folder that holds it (several folders separated by ':')";
    }

    // ---- availability -------------------------------------------------------------------------------

    /**
     * Whether a CUDA GPU can be used: the driver and the runtime are found and at least one device is visible.
     * Never throws, and answers quickly on a machine without a GPU. The other libraries (cuBLASLt, NVRTC,
     * NCCL) are required only when used, with their own clear error.
     */
    public static boolean cudaAvailable() {
        return whyCudaUnavailable().isEmpty();
    }

    /** Why {@link #cudaAvailable()} is false, in one line; empty when it is true. */
    public static Optional<String> whyCudaUnavailable() {
        Optional<String> reason = unavailable;
        if (reason == null) {
            synchronized (NativeLibraries.class) {
                reason = unavailable;
                if (reason == null) {
                    reason = probe();
                    unavailable = reason;
                }
            }
        }
        return reason;
    }

    private static Optional<String> probe() {
        try {
            for (Library needed : List.of(Library.DRIVER, Library.CUDART)) {
                if (find(needed).isEmpty()) {
                    return Optional.of(missingMessage(needed));
                }
            }
            int devices = Cuda.deviceCount();
            return devices > 0 ? Optional.empty() : Optional.of("no CUDA device is visible");
        } catch (Throwable t) {
            return Optional.of(t.getMessage() == null ? t.toString() : t.getMessage());
        }
    }

    // ---- helpers ------------------------------------------------------------------------------------

    private static void splitInto(List<Path> folders, String value) {
        if (value == null) {
            return;
        }
        for (String part : value.split(":")) {
            if (!part.isBlank()) {
                folders.add(Path.of(part.strip()));
            }
        }
    }

    private static List<Path> existing(List<Path> folders) {
        var out = new ArrayList<Path>();
        for (Path folder : folders) {
            try {
                Path real = folder.toRealPath(); // one entry for /usr/local/cuda/lib64 and its target
                if (Files.isDirectory(real) && !out.contains(real)) {
                    out.add(real);
                }
            } catch (IOException | SecurityException notThere) {
                // skip
            }
        }
        return out;
    }

    /** The folders matching {@code pattern}, where {@code *} matches within one path segment; newest name first. */
    static List<Path> glob(String pattern) {
        List<Path> current = List.of(Path.of("/"));
        for (String segment : pattern.split("/")) {
            if (segment.isEmpty()) {
                continue;
            }
            var next = new ArrayList<Path>();
            for (Path base : current) {
                if (!segment.contains("*")) {
                    Path child = base.resolve(segment);
                    if (Files.isDirectory(child)) {
                        next.add(child);
                    }
                    continue;
                }
                try (DirectoryStream<Path> children = Files.newDirectoryStream(base, segment)) {
                    var matched = new ArrayList<Path>();
                    for (Path child : children) {
                        if (Files.isDirectory(child)) {
                            matched.add(child);
                        }
                    }
                    matched.sort(Comparator.comparing((Path p) -> versionKey(p.getFileName().toString())).reversed());
                    next.addAll(matched);
                } catch (IOException | SecurityException unreadable) {
                    // skip folders we may not list
                }
            }
            current = next;
        }
        return current;
    }

    /** A name with its digit runs zero-padded, so that "cuda-12.10" sorts after "cuda-12.9". */
    private static String versionKey(String name) {
        Matcher m = Pattern.compile("\\d+").matcher(name);
        var sb = new StringBuilder();
        while (m.find()) {
            m.appendReplacement(sb, "%10s".formatted(m.group()).replace(' ', '0'));
        }
        m.appendTail(sb);
        return sb.toString();
    }

    // ---- NCCL versions ------------------------------------------------------------------------------

    private static final Pattern SO_VERSION = Pattern.compile("libnccl\\.so\\.(\\d+)\\.(\\d+)\\.(\\d+)");
    private static final Pattern DIST_INFO = Pattern.compile("nvidia_nccl[\\w-]*?-(\\d+)\\.(\\d+)\\.(\\d+).*\\.dist-info");

    /** NCCL_VERSION_CODE of the NCCL at {@code file} (major*10000 + minor*100 + patch), 0 when unknown. */
    static int ncclVersionOf(Path file) {
        try {
            Matcher so = SO_VERSION.matcher(file.toRealPath().getFileName().toString());
            if (so.matches()) {
                return code(so);
            }
            // a Python wheel: site-packages/nvidia/nccl/lib/libnccl.so.2 beside site-packages/nvidia_nccl_*.dist-info
            Path site = file.getParent().getParent().getParent().getParent();
            if (site != null && Files.isDirectory(site)) {
                try (Stream<Path> entries = Files.list(site)) {
                    Optional<Integer> fromWheel = entries.map(p -> DIST_INFO.matcher(p.getFileName().toString()))
                            .filter(Matcher::matches).map(NativeLibraries::code).max(Integer::compare);
                    if (fromWheel.isPresent()) {
                        return fromWheel.get();
                    }
                }
            }
            return probeNcclVersion(file);
        } catch (IOException | RuntimeException unknown) {
            return 0;
        }
    }

    private static int code(Matcher m) {
        return Integer.parseInt(m.group(1)) * 10000 + Integer.parseInt(m.group(2)) * 100 + Integer.parseInt(m.group(3));
    }

    /** Loads the file for a moment and asks it (ncclGetVersion does no initialisation). */
    private static int probeNcclVersion(Path file) {
        try (Arena arena = Arena.ofConfined()) {
            SymbolLookup lib = SymbolLookup.libraryLookup(file, arena);
            MemorySegment fn = lib.find("ncclGetVersion").orElseThrow();
            MethodHandle get = Native.LINKER.downcallHandle(fn,
                    FunctionDescriptor.of(ValueLayout.JAVA_INT, ValueLayout.ADDRESS));
            MemorySegment out = arena.allocate(ValueLayout.JAVA_INT);
            int status = (int) get.invokeExact(out);
            return status == 0 ? out.get(ValueLayout.JAVA_INT, 0) : 0;
        } catch (Throwable t) {
            return 0;
        }
    }
}
