package io.fsdp4j.report;

import io.fsdp4j.UserError;
import com.sun.net.httpserver.HttpExchange;
import com.sun.net.httpserver.HttpServer;
import io.prometheus.metrics.config.EscapingScheme;
import io.prometheus.metrics.core.metrics.Counter;
import io.prometheus.metrics.core.metrics.Gauge;
import io.prometheus.metrics.expositionformats.ExpositionFormatWriter;
import io.prometheus.metrics.expositionformats.OpenMetricsTextFormatWriter;
import io.prometheus.metrics.expositionformats.PrometheusTextFormatWriter;
import io.prometheus.metrics.model.registry.PrometheusRegistry;
import io.prometheus.metrics.model.snapshots.Labels;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.net.InetSocketAddress;

/**
 * The Prometheus endpoint of {@code log.prometheus_port}: {@code http://HOST:PORT/metrics} on every interface,
 * in the OpenMetrics text format when the scraper accepts it, else the Prometheus text format (also when it asks
 * for protobuf first, as Prometheus does with native histograms on: it reads what the Content-Type says).
 * Served by the JDK's HTTP server, not the client library's exporter, whose protobuf format needs 2 MB of shaded
 * protobuf that warns of {@code sun.misc.Unsafe} on JDK 24+, and which answers 500 when that is left out.
 * <p>Gauges hold the last step's values, counters add up steps and tokens since this process started. Every metric carries the label {@code job_name} when one is given (not
 * {@code job}, which Prometheus sets itself from the scrape config). Port 0 turns it off: then
 * {@link #record} does nothing. Its HTTP thread keeps the JVM alive until {@link #close}.
 */
public final class MetricsServer implements AutoCloseable {
    /** The label every metric carries when a job name is given. */
    public static final String JOB_LABEL = "job_name";

    private static final ExpositionFormatWriter OPEN_METRICS = OpenMetricsTextFormatWriter.create();
    private static final ExpositionFormatWriter PROMETHEUS_TEXT = PrometheusTextFormatWriter.create();

    private final HttpServer server;
    private final Gauge step, loss, gradNorm, lr, tokPerSec, tokPerSecPerGpu, mfu, peakMemory;
    private final Counter steps, tokens;

    private MetricsServer(HttpServer server, PrometheusRegistry registry, String jobName) {
        this.server = server;
        Labels labels = jobName == null || jobName.isBlank() ? Labels.EMPTY : Labels.of(JOB_LABEL, jobName);
        step = gauge(registry, labels, "fsdp4j_step", "optimizer step last completed");
        loss = gauge(registry, labels, "fsdp4j_loss", "training loss of the last step (token-weighted mean)");
        gradNorm = gauge(registry, labels, "fsdp4j_grad_norm", "global gradient norm of the last step, before clipping");
        lr = gauge(registry, labels, "fsdp4j_learning_rate", "learning rate of the last step");
        tokPerSec = gauge(registry, labels, "fsdp4j_tokens_per_second", "input tokens per second over the last step");
        tokPerSecPerGpu = gauge(registry, labels, "fsdp4j_tokens_per_second_per_gpu",
                "input tokens per second per rank over the last step");
        mfu = gauge(registry, labels, "fsdp4j_mfu", "model FLOPs utilisation of the last step, 0 to 1; NaN when undefined");
        peakMemory = gauge(registry, labels, "fsdp4j_peak_memory_bytes", "peak memory so far (CUDA: reserved; CPU: heap)");
        steps = counter(registry, labels, "fsdp4j_steps", "optimizer steps completed by this process");
        tokens = counter(registry, labels, "fsdp4j_tokens", "input tokens trained on by this process");
        for (Gauge g : new Gauge[] {loss, gradNorm, lr, tokPerSec, tokPerSecPerGpu, mfu, peakMemory}) {
            g.set(Double.NaN); // no step yet: "no value", never a misleading 0
        }
    }

    /**
     * Serves the endpoint on {@code port} (all interfaces), or returns one that is off when {@code port} is 0.
     *
     * @param jobName value of the {@code job_name} label on every metric, or null for no label
     * @throws UserError when the port is in use or cannot be bound
     */
    public static MetricsServer start(int port, String jobName) {
        if (port < 0 || port > 65535) {
            throw new UserError("log.prometheus_port " + port + ": not a port; give 1 to 65535, or 0 for off");
        }
        if (port == 0) {
            return new MetricsServer(null, new PrometheusRegistry(), jobName);
        }
        return bind(port, jobName);
    }

    /** Binds {@code port}; 0 here picks a free port (tests), see {@link #port()}. */
    static MetricsServer bind(int port, String jobName) {
        PrometheusRegistry registry = new PrometheusRegistry();
        HttpServer http;
        try {
            http = HttpServer.create(new InetSocketAddress(port), 8);
        } catch (IOException e) {
            String why = e.getMessage() == null ? e.getClass().getSimpleName() : e.getMessage();
            throw new UserError("log.prometheus_port " + port + ": cannot serve Prometheus metrics on port " + port
                    + " (" + why + "); choose a free port, or 0 for off", e);
        }
        var server = new MetricsServer(http, registry, jobName);
        http.createContext("/metrics", exchange -> scrape(exchange, registry));
        http.start(); // scrapes are answered on the server's own thread: they are rare and take microseconds
        return server;
    }

    private static void scrape(HttpExchange exchange, PrometheusRegistry registry) throws IOException {
        try (exchange) {
            String method = exchange.getRequestMethod();
            if (!method.equals("GET") && !method.equals("HEAD")) {
                exchange.sendResponseHeaders(405, -1);
                return;
            }
            String accept = exchange.getRequestHeaders().getFirst("Accept");
            ExpositionFormatWriter writer = OPEN_METRICS.accepts(accept) ? OPEN_METRICS : PROMETHEUS_TEXT;
            EscapingScheme escaping = EscapingScheme.fromAcceptHeader(accept);
            var body = new ByteArrayOutputStream();
            writer.write(body, registry.scrape(), escaping);
            exchange.getResponseHeaders().set("Content-Type", writer.getContentType() + escaping.toHeaderFormat());
            exchange.sendResponseHeaders(200, method.equals("HEAD") ? -1 : body.size());
            if (method.equals("GET")) {
                body.writeTo(exchange.getResponseBody());
            }
        }
    }

    /** True when serving. */
    public boolean enabled() {
        return server != null;
    }

    /** The port served, or 0 when off. */
    public int port() {
        return server == null ? 0 : server.getAddress().getPort();
    }

    /** Sets the gauges to this step's values and counts the step and its tokens. Call it for every step. */
    public void record(StepMetrics m) {
        if (server == null) {
            return;
        }
        step.set(m.step());
        loss.set(m.loss());
        gradNorm.set(m.gradNorm());
        lr.set(m.lr());
        tokPerSec.set(m.tokPerSec());
        tokPerSecPerGpu.set(m.tokPerSecPerGpu());
        mfu.set(m.mfu());
        peakMemory.set(m.peakMemoryBytes());
        steps.inc();
        tokens.inc(m.tokens());
    }

    /** Stops serving at once. */
    @Override
    public void close() {
        if (server != null) {
            server.stop(0);
        }
    }

    private static Gauge gauge(PrometheusRegistry registry, Labels labels, String name, String help) {
        return Gauge.builder().name(name).help(help).constLabels(labels).withoutExemplars().register(registry);
    }

    /** {@code name} without {@code _total}: the exposition formats add it. */
    private static Counter counter(PrometheusRegistry registry, Labels labels, String name, String help) {
        return Counter.builder().name(name).help(help).constLabels(labels).withoutExemplars().register(registry);
    }
}
