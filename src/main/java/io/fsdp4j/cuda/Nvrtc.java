package io.fsdp4j.cuda;

import static io.fsdp4j.cuda.Native.INT;
import static io.fsdp4j.cuda.Native.LONG;
import static io.fsdp4j.cuda.Native.PTR;
import static io.fsdp4j.cuda.Native.lazy;

import io.fsdp4j.cuda.NativeLibraries.Library;
import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.MethodHandle;
import java.nio.charset.StandardCharsets;
import java.nio.file.AtomicMoveNotSupportedException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.LinkedHashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;

/**
 * Compiles CUDA C++ to CUBIN for a device's architecture with NVRTC, with an on-disk cache: {@code
 * <FSDP4J_KERNEL_CACHE or ~/.cache/fsdp4j/kernels>/<sha256 of source, options and NVRTC version>.cubin}.
 * Kernels should be declared {@code extern "C" __global__} so that their names are not mangled. A program may
 * come with headers of its own ({@link Program#headers}), which its {@code #include "name"} lines find by name.
 * A compile error is a {@link CudaException} whose message holds NVRTC's log.
 */
public final class Nvrtc {
    private Nvrtc() {}

    /** The variable that moves the kernel cache. */
    public static final String CACHE_ENV = "FSDP4J_KERNEL_CACHE";
    private static final int NVRTC_ERROR_COMPILATION = 6;

    private static final Library LIB = Library.NVRTC;
    private static final MethodHandle nvrtcVersion = lazy(LIB, "nvrtcVersion", INT, PTR, PTR);
    private static final MethodHandle nvrtcGetErrorString = lazy(LIB, "nvrtcGetErrorString", PTR, INT);
    private static final MethodHandle nvrtcCreateProgram = lazy(LIB, "nvrtcCreateProgram", INT, PTR, PTR, PTR, INT, PTR, PTR);
    private static final MethodHandle nvrtcCompileProgram = lazy(LIB, "nvrtcCompileProgram", INT, LONG, INT, PTR);
    private static final MethodHandle nvrtcGetProgramLogSize = lazy(LIB, "nvrtcGetProgramLogSize", INT, LONG, PTR);
    private static final MethodHandle nvrtcGetProgramLog = lazy(LIB, "nvrtcGetProgramLog", INT, LONG, PTR);
    private static final MethodHandle nvrtcGetCUBINSize = lazy(LIB, "nvrtcGetCUBINSize", INT, LONG, PTR);
    private static final MethodHandle nvrtcGetCUBIN = lazy(LIB, "nvrtcGetCUBIN", INT, LONG, PTR);
    private static final MethodHandle nvrtcDestroyProgram = lazy(LIB, "nvrtcDestroyProgram", INT, PTR);

    /**
     * How to compile: the target architecture ({@code sm_90}, or {@code sm_90a} for Hopper-only instructions),
     * fast math (off by default), whether to add the CUDA {@code include} folders found beside the libraries
     * (on by default: NVRTC 13 has no built-in cuda_bf16.h or cuda_fp16.h; a toolkit or the nvidia-cuda-runtime /
     * nvidia-cu13 wheels provide them), and extra options.
     */
    public record Options(String arch, boolean fastMath, boolean cudaIncludes, List<String> extra) {
        public Options {
            extra = List.copyOf(extra);
        }

        /** For the architecture of {@code device}, with the CUDA include folders, without fast math. */
        public static Options forDevice(int device) {
            return new Options(Cuda.properties(device).arch(), false, true, List.of());
        }

        public Options withFastMath() {
            return new Options(arch, true, cudaIncludes, extra);
        }

        public Options withoutCudaIncludes() {
            return new Options(arch, fastMath, false, extra);
        }

        public Options with(String... more) {
            var all = new ArrayList<>(extra);
            all.addAll(List.of(more));
            return new Options(arch, fastMath, cudaIncludes, all);
        }

        /** The NVRTC command line: architecture, C++17, fast math if asked, CUDA include folders if asked, extras. */
        List<String> commandLine() {
            var args = new ArrayList<String>();
            args.add("--gpu-architecture=" + arch);
            args.add("-std=c++17");
            if (fastMath) {
                args.add("--use_fast_math");
            }
            if (cudaIncludes) {
                for (Path include : includeFolders()) {
                    args.add("--include-path=" + include);
                }
            }
            args.addAll(extra);
            return args;
        }
    }

    /**
     * One program exactly as NVRTC receives it: its name (in messages), its source, and the headers that its
     * {@code #include "name"} lines resolve to (include name -> text, in order; NVRTC's {@code headers} and
     * {@code includeNames}).
     */
    public record Program(String name, String source, Map<String, String> headers) {
        public Program {
            headers = java.util.Collections.unmodifiableMap(new LinkedHashMap<>(headers));
        }

        /** A program that includes no header of its own. */
        public static Program of(String source, String name) {
            return new Program(name, source, Map.of());
        }
    }

    /** NVRTC's version, e.g. {@code 13.0}. */
    public record Version(int major, int minor) {
        @Override
        public String toString() {
            return major + "." + minor;
        }
    }

    public static Version version() {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment major = arena.allocate(INT), minor = arena.allocate(INT);
            check("nvrtcVersion", (int) nvrtcVersion.invokeExact(major, minor));
            return new Version(major.get(INT, 0), minor.get(INT, 0));
        } catch (Throwable t) {
            throw Native.rethrow(t);
        }
    }

    /** Where compiled kernels are kept. */
    public static Path cacheDir() {
        String dir = System.getenv(CACHE_ENV);
        if (dir != null && !dir.isBlank()) {
            return Path.of(dir);
        }
        return Path.of(System.getProperty("user.home"), ".cache", "fsdp4j", "kernels");
    }

    /** The CUBIN of {@code source} ({@code name} appears in messages), from the cache when compiled before. */
    public static byte[] compile(String source, String name, Options options) {
        return compile(Program.of(source, name), options);
    }

    /** The CUBIN of {@code program}, from the cache when compiled before (its headers are part of the key). */
    public static byte[] compile(Program program, Options options) {
        List<String> commandLine = options.commandLine();
        Path cached = cacheDir().resolve(key(program, commandLine) + ".cubin");
        try {
            if (Files.isRegularFile(cached)) {
                return Files.readAllBytes(cached);
            }
        } catch (IOException unreadable) {
            // compile again
        }
        byte[] cubin = compileUncached(program, commandLine);
        store(cached, cubin);
        return cubin;
    }

    /** Whether {@link #compile} would find this source and these options in the cache. */
    public static boolean isCached(String source, Options options) {
        return isCached(Program.of(source, "source"), options);
    }

    /** Whether {@link #compile} would find this program and these options in the cache. */
    public static boolean isCached(Program program, Options options) {
        return Files.isRegularFile(cacheDir().resolve(key(program, options.commandLine()) + ".cubin"));
    }

    /** The source, then each header's name and text (a program without headers keeps the key it always had). */
    private static String key(Program program, List<String> commandLine) {
        try {
            MessageDigest sha = MessageDigest.getInstance("SHA-256");
            sha.update(program.source().getBytes(StandardCharsets.UTF_8));
            sha.update((byte) 0);
            for (var header : program.headers().entrySet()) {
                sha.update(header.getKey().getBytes(StandardCharsets.UTF_8));
                sha.update((byte) 1);
                sha.update(header.getValue().getBytes(StandardCharsets.UTF_8));
                sha.update((byte) 0);
            }
            sha.update(String.join("\u0001", commandLine).getBytes(StandardCharsets.UTF_8));
            sha.update((byte) 0);
            sha.update(version().toString().getBytes(StandardCharsets.UTF_8));
            return HexFormat.of().formatHex(sha.digest());
        } catch (NoSuchAlgorithmException e) {
            throw new IllegalStateException(e);
        }
    }

    /** Writes to a temporary name then renames, so a reader never sees half a file; a failure only skips caching. */
    private static void store(Path cached, byte[] cubin) {
        try {
            Files.createDirectories(cached.getParent());
            Path tmp = Files.createTempFile(cached.getParent(), cached.getFileName().toString(), ".tmp");
            Files.write(tmp, cubin);
            try {
                Files.move(tmp, cached, StandardCopyOption.ATOMIC_MOVE, StandardCopyOption.REPLACE_EXISTING);
            } catch (AtomicMoveNotSupportedException e) {
                Files.move(tmp, cached, StandardCopyOption.REPLACE_EXISTING);
            }
        } catch (IOException | SecurityException notWritable) {
            // no cache this time
        }
    }

    private static byte[] compileUncached(Program program, List<String> commandLine) {
        String name = program.name();
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment progOut = arena.allocate(PTR);
            int count = program.headers().size();
            MemorySegment headers = MemorySegment.NULL, includeNames = MemorySegment.NULL;
            if (count > 0) {
                headers = arena.allocate(PTR, count);
                includeNames = arena.allocate(PTR, count);
                int i = 0;
                for (var header : program.headers().entrySet()) {
                    includeNames.setAtIndex(PTR, i, arena.allocateFrom(header.getKey()));
                    headers.setAtIndex(PTR, i, arena.allocateFrom(header.getValue()));
                    i++;
                }
            }
            check("nvrtcCreateProgram(" + name + ")", (int) nvrtcCreateProgram.invokeExact(progOut,
                    arena.allocateFrom(program.source()), arena.allocateFrom(name), count, headers, includeNames));
            long handle = progOut.get(LONG, 0);
            try {
                MemorySegment options = arena.allocate(PTR, commandLine.size());
                for (int i = 0; i < commandLine.size(); i++) {
                    options.setAtIndex(PTR, i, arena.allocateFrom(commandLine.get(i)));
                }
                int status = (int) nvrtcCompileProgram.invokeExact(handle, commandLine.size(), options);
                if (status != 0) {
                    String log = log(arena, handle);
                    if (log.contains("could not open source file") && includeFolders().isEmpty()) {
                        log += "\n(no CUDA include folder was found beside the CUDA libraries; add one with"
                                + " Options.with(\"--include-path=...\"))";
                    }
                    throw new CudaException("nvrtcCompileProgram(" + name + ")", status, errorString(status)
                            + (status == NVRTC_ERROR_COMPILATION ? "" : " with " + String.join(" ", commandLine))
                            + (log.isBlank() ? "" : "\n" + log.strip()));
                }
                MemorySegment size = arena.allocate(LONG);
                check("nvrtcGetCUBINSize", (int) nvrtcGetCUBINSize.invokeExact(handle, size));
                MemorySegment cubin = arena.allocate(size.get(LONG, 0));
                check("nvrtcGetCUBIN", (int) nvrtcGetCUBIN.invokeExact(handle, cubin));
                return cubin.toArray(ValueLayout.JAVA_BYTE);
            } finally {
                int ignored = (int) nvrtcDestroyProgram.invokeExact(progOut);
            }
        } catch (Throwable t) {
            throw Native.rethrow(t);
        }
    }

    private static String log(Arena arena, long program) throws Throwable {
        MemorySegment size = arena.allocate(LONG);
        if ((int) nvrtcGetProgramLogSize.invokeExact(program, size) != 0 || size.get(LONG, 0) <= 1) {
            return "";
        }
        MemorySegment text = arena.allocate(size.get(LONG, 0));
        if ((int) nvrtcGetProgramLog.invokeExact(program, text) != 0) {
            return "";
        }
        return text.getString(0);
    }

    /** The {@code include} folders beside the NVRTC and runtime libraries found (for cuda_bf16.h and friends). */
    static List<Path> includeFolders() {
        var folders = new LinkedHashSet<Path>();
        for (Library library : List.of(Library.NVRTC, Library.CUDART)) {
            NativeLibraries.find(library).map(NativeLibraries.Location::file).ifPresent(file -> {
                var candidates = new ArrayList<Path>();
                for (Path lib = file.getParent(); lib != null && lib.getParent() != null && candidates.size() < 2;
                        lib = lib.getParent()) {
                    candidates.add(lib.resolveSibling("include"));
                }
                for (Path candidate : candidates) {
                    if (Files.isRegularFile(candidate.resolve("cuda_runtime.h")) || Files.isRegularFile(candidate.resolve("cuda_bf16.h"))) {
                        folders.add(candidate.toAbsolutePath().normalize());
                    }
                }
            });
        }
        return List.copyOf(folders);
    }

    private static void check(String function, int status) {
        if (status != 0) {
            throw new CudaException(function, status, errorString(status));
        }
    }

    private static String errorString(int status) {
        try {
            return Native.string((MemorySegment) nvrtcGetErrorString.invokeExact(status)) + " (nvrtcResult " + status + ")";
        } catch (Throwable t) {
            return "nvrtcResult " + status;
        }
    }
}
