package io.fsdp4j.job;

import io.fsdp4j.UserError;
import java.io.BufferedInputStream;
import java.io.BufferedOutputStream;
import java.io.DataInputStream;
import java.io.DataOutputStream;
import java.io.IOException;
import java.net.BindException;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.util.HashMap;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;

/**
 * The rendezvous store of a job: a small key-value store served over TCP by the first process, through which the
 * processes find each other. Values are bytes; {@code add} treats a value as a decimal counter, so a counter
 * doubles as a barrier. A client first says hello with the job token and the job's restart attempt; a wrong
 * token is refused and the connection closed, and the refusal is stored under {@value #REFUSED} (naming the refused
 * process's address and the reason) for the processes waiting for it. A client of a later attempt than the store's is turned away for a
 * while (the store is probably the failed attempt's, about to go), see {@link RendezvousClient#connect}. Every
 * wait is bounded by the client's request.
 *
 * <p>Frames ({@link DataOutputStream} encoding, one request and its reply at a time per connection):
 * <pre>
 *   hello:   UTF magic, UTF token, int attempt        -> byte status [int storeAttempt when OTHER_ATTEMPT]
 *   SET:     byte 1, UTF key, int n, n bytes          -> byte 0
 *   GET:     byte 2, UTF key, long waitMillis         -> byte 0, int n, n bytes | byte 1 (not there in time)
 *   ADD:     byte 3, UTF key, long delta              -> byte 0, long newValue
 *   AT_LEAST: byte 4, UTF key, long target, long waitMillis -> byte 0|1 (reached | not in time), long value
 *   ON_LOSS: byte 5, UTF key, int n, n bytes          -> byte 0 (set key to the bytes, unless already set, when this
 *            connection ends before a CANCEL: how a process that dies without a word is noticed)
 *   CANCEL:  byte 6, UTF key                          -> byte 0
 * </pre>
 * A request the store cannot serve is answered {@code byte 9, UTF message}.
 */
public final class RendezvousServer implements AutoCloseable {
    static final String MAGIC = "fsdp4j-rdzv/1";
    /** A client's attempt that every store accepts. */
    static final int ANY_ATTEMPT = -1;
    static final byte OK = 0, WRONG_TOKEN = 1, OTHER_ATTEMPT = 2, NOT_FSDP4J = 3;
    static final byte SET = 1, GET = 2, ADD = 3, AT_LEAST = 4, ON_LOSS = 5, CANCEL = 6;
    static final byte FOUND = 0, TIMED_OUT = 1, FAILED = 9;
    private static final int HELLO_TIMEOUT_MS = 10_000;
    /** The key under which the store says which process it refused and why (the latest refusal). */
    public static final String REFUSED = "rdzv/refused";
    /**
     * A client that has sent nothing for this long, and waits for no reply, is not waited for by {@link #awaitIdle}:
     * its process is stopped or frozen (a live one publishes its progress several times a second).
     */
    static final java.time.Duration QUIET = java.time.Duration.ofSeconds(5);

    /** When a client was last heard (nanoTime), and whether it waits for a reply now. */
    private static final class Activity {
        volatile long lastHeard = System.nanoTime();
        volatile boolean busy = true; // until the hello is answered
    }

    private final ServerSocket server;
    private final String token;
    private final int attempt;
    private final Map<String, byte[]> values = new HashMap<>(); // guarded by this
    private final Map<Socket, Activity> clients = new ConcurrentHashMap<>();
    private volatile boolean closed;

    private RendezvousServer(ServerSocket server, String token, int attempt) {
        this.server = server;
        this.token = token;
        this.attempt = attempt;
    }

    /**
     * Serves the store on {@code port} of every interface of this host (0: a free port, see {@link #port()}).
     *
     * @param attempt the job's restart attempt (0 first); clients of a later attempt are turned away
     */
    public static RendezvousServer start(int port, String token, int attempt) {
        ServerSocket socket = null;
        try {
            socket = new ServerSocket();
            socket.setReuseAddress(true);
            socket.bind(new InetSocketAddress(port), 256);
        } catch (BindException e) {
            closeQuietly(socket);
            throw new UserError("rendezvous: cannot serve the store on port " + port + " of this host: " + e.getMessage()
                    + " (another job, or an earlier run still stopping, holds it; choose another port in dist.rdzv)");
        } catch (IOException e) {
            closeQuietly(socket);
            throw new UserError("rendezvous: cannot serve the store on port " + port + ": " + e.getMessage(), e);
        }
        RendezvousServer store = new RendezvousServer(socket, token, attempt);
        Thread.ofPlatform().daemon().name("rdzv-store-" + store.port()).start(store::acceptLoop);
        return store;
    }

    public int port() {
        return server.getLocalPort();
    }

    private void acceptLoop() {
        while (!closed) {
            Socket client;
            try {
                client = server.accept();
            } catch (IOException e) {
                return; // closed
            }
            Activity activity = new Activity();
            clients.put(client, activity);
            Thread.ofVirtual().name("rdzv-client").start(() -> {
                String[] onLossKey = new String[1];
                byte[][] onLossValue = new byte[1][];
                try (client) {
                    serve(client, activity, onLossKey, onLossValue);
                } catch (IOException e) {
                    // the client went away; nothing to clean up but the socket
                } finally {
                    clients.remove(client);
                    if (onLossKey[0] != null && !closed) {
                        putIfAbsent(onLossKey[0], onLossValue[0]);
                    }
                }
            });
        }
    }

    private void serve(Socket socket, Activity activity, String[] onLossKey, byte[][] onLossValue) throws IOException {
        socket.setTcpNoDelay(true);
        socket.setSoTimeout(HELLO_TIMEOUT_MS);
        var in = new DataInputStream(new BufferedInputStream(socket.getInputStream()));
        var out = new DataOutputStream(new BufferedOutputStream(socket.getOutputStream()));
        if (!MAGIC.equals(in.readUTF())) {
            out.writeByte(NOT_FSDP4J);
            out.flush();
            return;
        }
        String given = in.readUTF();
        int theirAttempt = in.readInt();
        if (!JobToken.matches(token, given)) {
            out.writeByte(WRONG_TOKEN);
            out.flush();
            // the processes waiting for the refused one hear of it at once, instead of at the rendezvous timeout
            put(REFUSED, ("the process connecting from " + socket.getInetAddress().getHostAddress() + " had a wrong "
                    + "job token (" + JobToken.ENV + ")").getBytes(StandardCharsets.UTF_8));
            return;
        }
        if (theirAttempt > attempt) {
            out.writeByte(OTHER_ATTEMPT);
            out.writeInt(attempt);
            out.flush();
            return;
        }
        out.writeByte(OK);
        out.flush();
        socket.setSoTimeout(0); // a client may stay quiet between requests; waits are bounded per request
        while (!closed) {
            activity.lastHeard = System.nanoTime();
            activity.busy = false;
            int op = in.read();
            if (op < 0) {
                return;
            }
            activity.busy = true;
            activity.lastHeard = System.nanoTime();
            String key = in.readUTF();
            try {
                switch (op) {
                    case SET -> {
                        byte[] value = in.readNBytes(in.readInt());
                        put(key, value);
                        out.writeByte(OK);
                    }
                    case GET -> {
                        byte[] value = await(key, in.readLong());
                        if (value == null) {
                            out.writeByte(TIMED_OUT);
                        } else {
                            out.writeByte(FOUND);
                            out.writeInt(value.length);
                            out.write(value);
                        }
                    }
                    case ADD -> {
                        long value = add(key, in.readLong());
                        out.writeByte(OK);
                        out.writeLong(value);
                    }
                    case AT_LEAST -> {
                        long target = in.readLong(), wait = in.readLong();
                        long value = awaitAtLeast(key, target, wait);
                        out.writeByte(value >= target ? FOUND : TIMED_OUT);
                        out.writeLong(value);
                    }
                    case ON_LOSS -> {
                        onLossValue[0] = in.readNBytes(in.readInt());
                        onLossKey[0] = key;
                        out.writeByte(OK);
                    }
                    case CANCEL -> {
                        onLossKey[0] = null;
                        out.writeByte(OK);
                    }
                    default -> throw new IOException("unknown store request " + op);
                }
            } catch (IllegalStateException e) {
                out.writeByte(FAILED);
                out.writeUTF(e.getMessage());
            }
            out.flush();
        }
    }

    private synchronized void put(String key, byte[] value) {
        values.put(key, value);
        notifyAll();
    }

    private synchronized void putIfAbsent(String key, byte[] value) {
        values.putIfAbsent(key, value);
        notifyAll();
    }

    private synchronized byte[] await(String key, long waitMillis) {
        long deadline = System.nanoTime() + waitMillis * 1_000_000;
        while (!values.containsKey(key) && !closed) {
            long left = (deadline - System.nanoTime()) / 1_000_000;
            if (left <= 0) {
                return null;
            }
            waitQuietly(left);
        }
        return values.get(key);
    }

    private synchronized long add(String key, long delta) {
        long value = counter(key) + delta;
        values.put(key, Long.toString(value).getBytes(StandardCharsets.UTF_8));
        notifyAll();
        return value;
    }

    private synchronized long awaitAtLeast(String key, long target, long waitMillis) {
        long deadline = System.nanoTime() + waitMillis * 1_000_000;
        while (counter(key) < target && !closed) {
            long left = (deadline - System.nanoTime()) / 1_000_000;
            if (left <= 0) {
                break;
            }
            waitQuietly(left);
        }
        return counter(key);
    }

    private long counter(String key) {
        byte[] value = values.get(key);
        if (value == null) {
            return 0;
        }
        try {
            return Long.parseLong(new String(value, StandardCharsets.UTF_8));
        } catch (NumberFormatException e) {
            throw new IllegalStateException("store key '" + key + "' holds a value that is not a counter");
        }
    }

    private void waitQuietly(long millis) {
        try {
            wait(millis);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new IllegalStateException("the store was interrupted");
        }
    }

    /**
     * Waits up to {@code limit} until no client is connected but quiet ones ({@link #QUIET}): the host of the store
     * leaves last, so that the others finish their last exchange (such as reading why the job stops) before the
     * store goes away; a stopped process is not waited for.
     */
    public void awaitIdle(java.time.Duration limit) {
        long deadline = System.nanoTime() + limit.toNanos();
        while (clients.values().stream().anyMatch(a -> a.busy || System.nanoTime() - a.lastHeard < QUIET.toNanos())
                && System.nanoTime() < deadline) {
            try {
                Thread.sleep(20);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                return;
            }
        }
    }

    /** Stops serving: closes the listening socket and every client connection. */
    @Override
    public void close() {
        closed = true;
        closeQuietly(server);
        clients.keySet().forEach(RendezvousServer::closeQuietly);
        synchronized (this) {
            notifyAll();
        }
    }

    private static void closeQuietly(AutoCloseable c) {
        if (c != null) {
            try {
                c.close();
            } catch (Exception e) {
                // closing anyway
            }
        }
    }
}
