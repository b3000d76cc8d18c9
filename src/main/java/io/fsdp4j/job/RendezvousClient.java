package io.fsdp4j.job;

import io.fsdp4j.UserError;
import java.io.BufferedInputStream;
import java.io.BufferedOutputStream;
import java.io.DataInputStream;
import java.io.DataOutputStream;
import java.io.EOFException;
import java.io.IOException;
import java.net.ConnectException;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.NoRouteToHostException;
import java.net.Socket;
import java.net.SocketTimeoutException;
import java.net.UnknownHostException;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.Optional;
import java.util.concurrent.locks.ReentrantLock;

/**
 * A connection to a job's {@link RendezvousServer}. Its methods block for at most the wait they are given (plus a
 * margin for the network), and fail with a one-line message when the store goes away or refuses this process.
 */
public final class RendezvousClient implements AutoCloseable {
    private static final int NETWORK_MARGIN_MS = 30_000;

    private final Socket socket;
    private final DataInputStream in;
    private final DataOutputStream out;
    private final String address;
    private final ReentrantLock turn = new ReentrantLock(true);

    private RendezvousClient(Socket socket, String address) throws IOException {
        this.socket = socket;
        this.address = address;
        this.in = new DataInputStream(new BufferedInputStream(socket.getInputStream()));
        this.out = new DataOutputStream(new BufferedOutputStream(socket.getOutputStream()));
    }

    /**
     * Connects and says hello, trying again until {@code timeout} while the store is not up yet (node 0 may start
     * after the others). A store of an earlier restart attempt than {@code attempt} is probably the failed
     * attempt's, about to go: it is waited out for a while (10 s, at most half the timeout), then joined all the
     * same (its node may have been restarted by a scheduler rather than by its launcher).
     */
    public static RendezvousClient connect(String host, int port, String token, int attempt, Duration timeout) {
        String address = JobLayout.hostPort(host, port);
        long start = System.nanoTime(), deadline = start + timeout.toNanos();
        long grace = start + Math.min(Duration.ofSeconds(10).toNanos(), timeout.toNanos() / 2);
        String lastProblem = "no answer";
        long pause = 100;
        while (true) {
            Socket socket = new Socket();
            try {
                long left = Math.max(1, (deadline - System.nanoTime()) / 1_000_000);
                socket.connect(new InetSocketAddress(host, port), (int) Math.min(left, 10_000));
                socket.setTcpNoDelay(true);
                socket.setSoTimeout(NETWORK_MARGIN_MS);
                var client = new RendezvousClient(socket, address);
                Integer storeAttempt = client.hello(token,
                        System.nanoTime() < grace ? attempt : RendezvousServer.ANY_ATTEMPT);
                if (storeAttempt == null) {
                    return client;
                }
                client.close();
                lastProblem = "the store there still belongs to restart attempt " + storeAttempt + " (this is " + attempt + ")";
            } catch (ConnectException | NoRouteToHostException | UnknownHostException | SocketTimeoutException e) {
                closeQuietly(socket);
                lastProblem = e instanceof UnknownHostException ? "unknown host " + host : e.getMessage();
            } catch (EOFException e) {
                closeQuietly(socket);
                lastProblem = "the connection closed during the hello";
            } catch (IOException e) {
                closeQuietly(socket);
                lastProblem = e.getMessage();
            }
            if (System.nanoTime() >= deadline) {
                throw new UserError("rendezvous: could not reach the store at " + address + " within "
                        + JobLayout.seconds(timeout) + " (" + lastProblem + "); is node 0 running, and is " + address
                        + " its address (dist.rdzv or MASTER_ADDR:MASTER_PORT)?");
            }
            sleep(Math.min(pause, Math.max(1, (deadline - System.nanoTime()) / 1_000_000)));
            pause = Math.min(pause * 2, 1000);
        }
    }

    /** Null when welcome; the store's attempt when it belongs to another one. */
    private Integer hello(String token, int attempt) throws IOException {
        out.writeUTF(RendezvousServer.MAGIC);
        out.writeUTF(token);
        out.writeInt(attempt);
        out.flush();
        int status = in.readByte();
        return switch (status) {
            case RendezvousServer.OK -> null;
            case RendezvousServer.OTHER_ATTEMPT -> in.readInt();
            case RendezvousServer.WRONG_TOKEN -> {
                close();
                throw new UserError("rendezvous at " + address + " refused this process: wrong job token ("
                        + JobToken.ENV + "); every node of a job must have the same one, and the others were told");
            }
            default -> {
                close();
                throw new UserError("rendezvous at " + address + " refused this process (status " + status + ")");
            }
        };
    }

    /** "host:port" of the store. */
    public String address() {
        return address;
    }

    /** The address of this host on the network that reaches the store. */
    public InetAddress localAddress() {
        return socket.getLocalAddress();
    }

    public void set(String key, byte[] value) {
        exchange(() -> {
            request(RendezvousServer.SET, key, 0);
            out.writeInt(value.length);
            out.write(value);
            out.flush();
            return reply();
        });
    }

    public void set(String key, String value) {
        set(key, value.getBytes(StandardCharsets.UTF_8));
    }

    /** The value of {@code key}, waiting up to {@code wait} for someone to set it; empty when nobody did. */
    public Optional<byte[]> get(String key, Duration wait) {
        return exchange(() -> {
            request(RendezvousServer.GET, key, wait.toMillis());
            out.writeLong(wait.toMillis());
            out.flush();
            if (reply() == RendezvousServer.TIMED_OUT) {
                return Optional.empty();
            }
            return Optional.of(in.readNBytes(in.readInt()));
        });
    }

    public Optional<String> getString(String key, Duration wait) {
        return get(key, wait).map(b -> new String(b, StandardCharsets.UTF_8));
    }

    /**
     * Asks the store to set {@code key} to {@code value} (unless set already) when this connection ends before
     * {@link #cancelOnLoss}: if this process dies, the others learn it from the store.
     */
    public void setOnLoss(String key, String value) {
        byte[] bytes = value.getBytes(StandardCharsets.UTF_8);
        exchange(() -> {
            request(RendezvousServer.ON_LOSS, key, 0);
            out.writeInt(bytes.length);
            out.write(bytes);
            out.flush();
            return reply();
        });
    }

    /** Withdraws {@link #setOnLoss}: this process is leaving as planned. */
    public void cancelOnLoss() {
        exchange(() -> {
            request(RendezvousServer.CANCEL, "", 0);
            out.flush();
            return reply();
        });
    }

    /** Adds {@code delta} to the counter {@code key} (0 when unset) and returns the new value. */
    public long add(String key, long delta) {
        return exchange(() -> {
            request(RendezvousServer.ADD, key, 0);
            out.writeLong(delta);
            out.flush();
            reply();
            return in.readLong();
        });
    }

    /** Waits up to {@code wait} for the counter {@code key} to reach {@code target}; returns its value then. */
    public long awaitAtLeast(String key, long target, Duration wait) {
        return exchange(() -> {
            request(RendezvousServer.AT_LEAST, key, wait.toMillis());
            out.writeLong(target);
            out.writeLong(wait.toMillis());
            out.flush();
            reply();
            return in.readLong();
        });
    }

    /** One request and its reply on the connection, which callers take in turn. */
    private interface Exchange<T> {
        T run() throws IOException;
    }

    /**
     * Runs one request-reply exchange holding the connection. The lock is fair: a caller that polls in a loop
     * (the job watch) must not keep out another that has something to say (a collective watchdog posting why
     * the job stops); a plain monitor lets the poller take it back again and again.
     */
    private <T> T exchange(Exchange<T> exchange) {
        turn.lock();
        try {
            return exchange.run();
        } catch (IOException e) {
            throw lost(e);
        } finally {
            turn.unlock();
        }
    }

    /**
     * A barrier by counter: counts this caller in {@code name} and waits up to {@code wait} until {@code parties}
     * have; returns how many had arrived (fewer than {@code parties} when the wait ran out).
     */
    public long barrier(String name, int parties, Duration wait) {
        add(name, 1);
        return awaitAtLeast(name, parties, wait);
    }

    private void request(byte op, String key, long waitMillis) throws IOException {
        socket.setSoTimeout((int) Math.min(Integer.MAX_VALUE, waitMillis + NETWORK_MARGIN_MS));
        out.writeByte(op);
        out.writeUTF(key);
    }

    private byte reply() throws IOException {
        byte status = in.readByte();
        if (status == RendezvousServer.FAILED) {
            throw new IllegalStateException("rendezvous store at " + address + ": " + in.readUTF());
        }
        return status;
    }

    private UserError lost(IOException e) {
        closeQuietly(socket);
        return new UserError("rendezvous: lost the store at " + address + " (" + (e instanceof EOFException
                ? "connection closed" : e.getMessage()) + "; did node 0 stop?)", e);
    }

    @Override
    public void close() {
        closeQuietly(socket);
    }

    private static void closeQuietly(Socket s) {
        try {
            s.close();
        } catch (IOException e) {
            // closing anyway
        }
    }

    private static void sleep(long millis) {
        try {
            Thread.sleep(millis);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new UserError("rendezvous: interrupted while waiting for the store");
        }
    }
}
