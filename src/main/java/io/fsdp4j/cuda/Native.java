package io.fsdp4j.cuda;

import io.fsdp4j.UserError;
import io.fsdp4j.cuda.NativeLibraries.Library;
import java.lang.foreign.AddressLayout;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemoryLayout;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.MethodHandle;
import java.lang.invoke.MethodHandles;
import java.lang.invoke.MethodType;
import java.lang.invoke.MutableCallSite;

/**
 * Downcall plumbing shared by the bindings. Each native function is a {@code static final} method handle made by
 * {@link #lazy}: nothing is loaded until its first call, which finds the library (or throws the library's
 * {@link UserError}) and then relinks the handle to the real downcall, so later calls cost a plain downcall.
 *
 * <p>Layout conventions (x86-64 System V): device pointers and opaque handles are passed as {@link #LONG} (a
 * pointer and a 64-bit integer travel the same way), {@code size_t} as {@link #LONG}, enums and {@code unsigned int}
 * as {@link #INT}; host out-parameters and strings as {@link #PTR}.
 */
@SuppressWarnings("restricted") // the native layer: loading libraries and making downcalls is its job
final class Native {
    static final Linker LINKER = Linker.nativeLinker();
    static final ValueLayout.OfInt INT = ValueLayout.JAVA_INT;
    static final ValueLayout.OfLong LONG = ValueLayout.JAVA_LONG;
    static final ValueLayout.OfFloat FLOAT = ValueLayout.JAVA_FLOAT;
    static final AddressLayout PTR = ValueLayout.ADDRESS;

    private static final MethodHandle RESOLVE;

    static {
        try {
            RESOLVE = MethodHandles.lookup().findVirtual(Pending.class, "invoke",
                    MethodType.methodType(Object.class, Object[].class));
        } catch (ReflectiveOperationException e) {
            throw new ExceptionInInitializerError(e);
        }
    }

    private Native() {}

    /** A handle to {@code symbol} of {@code library} returning {@code result} (null for void). */
    static MethodHandle lazy(Library library, String symbol, MemoryLayout result, MemoryLayout... args) {
        FunctionDescriptor descriptor = result == null ? FunctionDescriptor.ofVoid(args) : FunctionDescriptor.of(result, args);
        MethodType type = descriptor.toMethodType();
        var site = new MutableCallSite(type);
        MethodHandle first = RESOLVE.bindTo(new Pending(site, library, symbol, descriptor))
                .asCollector(Object[].class, type.parameterCount())
                .asType(type);
        site.setTarget(first);
        return site.dynamicInvoker();
    }

    /** The first call of a lazy handle: link, relink the call site, call. */
    private record Pending(MutableCallSite site, Library library, String symbol, FunctionDescriptor descriptor) {
        @SuppressWarnings("unused") // called through RESOLVE
        Object invoke(Object[] args) throws Throwable {
            MemorySegment address = NativeLibraries.lookup(library).find(symbol).orElseThrow(() -> new UserError(
                    NativeLibraries.find(library).map(Object::toString).orElse(library.title()) + " has no function "
                            + symbol + ": it is too old for fsdp4j; point " + NativeLibraries.ENV
                            + " at a newer " + library.title()));
            MethodHandle real = LINKER.downcallHandle(address, descriptor);
            synchronized (this) {
                site.setTarget(real);
            }
            return real.invokeWithArguments(args);
        }
    }

    /** The NUL-terminated string at {@code address} ("" for NULL). */
    static String string(MemorySegment address) {
        return address.equals(MemorySegment.NULL) ? "" : address.reinterpret(Long.MAX_VALUE).getString(0);
    }

    /** Rethrows errors and runtime exceptions as they are, and wraps anything else (a downcall throws neither). */
    static RuntimeException rethrow(Throwable t) {
        if (t instanceof RuntimeException r) {
            throw r;
        }
        if (t instanceof Error e) {
            throw e;
        }
        throw new IllegalStateException(t);
    }
}
