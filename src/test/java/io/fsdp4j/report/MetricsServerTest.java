package io.fsdp4j.report;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.fsdp4j.UserError;
import java.net.ServerSocket;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.util.HashMap;
import java.util.Map;
import org.junit.jupiter.api.Test;

/** The endpoint on a port the system picks, read back over HTTP as Prometheus would. */
class MetricsServerTest {
    private static final HttpClient HTTP = HttpClient.newHttpClient();

    private static String scrape(int port, String accept) throws Exception {
        return get(port, accept).body();
    }

    private static HttpResponse<String> get(int port, String accept) throws Exception {
        var request = HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + port + "/metrics"));
        if (accept != null) {
            request.header("Accept", accept);
        }
        HttpResponse<String> response = HTTP.send(request.build(), HttpResponse.BodyHandlers.ofString());
        assertThat(response.statusCode()).isEqualTo(200);
        return response;
    }

    /** Sample lines {@code name{labels} value} to name (labels kept) -> value. */
    private static Map<String, Double> samples(String text) {
        Map<String, Double> values = new HashMap<>();
        for (String line : text.split("\n")) {
            if (!line.isBlank() && !line.startsWith("#")) {
                int space = line.lastIndexOf(' ');
                values.put(line.substring(0, space), Double.parseDouble(line.substring(space + 1)));
            }
        }
        return values;
    }

    @Test
    void servesTheLastStepAndTotals() throws Exception {
        try (var server = MetricsServer.bind(0, null)) {
            assertThat(server.enabled()).isTrue();
            assertThat(samples(scrape(server.port(), null))).containsEntry("fsdp4j_steps_total", 0.0)
                    .hasEntrySatisfying("fsdp4j_loss", v -> assertThat(v).isNaN());
            server.record(StepMetrics.of(1, 4.0, 2.0, 1e-4, 1000, 900, 0.5, 2, Double.NaN, 1.0));
            server.record(StepMetrics.of(2, 3.5, 1.5, 2e-4, 1000, 950, 0.25, 2, 0.3, 2.0));

            Map<String, Double> v = samples(scrape(server.port(), null));
            assertThat(v).containsEntry("fsdp4j_step", 2.0)
                    .containsEntry("fsdp4j_loss", 3.5)
                    .containsEntry("fsdp4j_grad_norm", 1.5)
                    .containsEntry("fsdp4j_learning_rate", 2e-4)
                    .containsEntry("fsdp4j_tokens_per_second", 4000.0)
                    .containsEntry("fsdp4j_tokens_per_second_per_gpu", 2000.0)
                    .containsEntry("fsdp4j_mfu", 0.3)
                    .containsEntry("fsdp4j_peak_memory_bytes", 2.0 * (1L << 30))
                    .containsEntry("fsdp4j_steps_total", 2.0)
                    .containsEntry("fsdp4j_tokens_total", 2000.0);
        }
    }

    @Test
    void aJobNameLabelsEveryMetric() throws Exception {
        try (var server = MetricsServer.bind(0, "sft-7b")) {
            server.record(StepMetrics.of(1, 4.0, 2.0, 1e-4, 1000, 900, 0.5, 1, Double.NaN, 1.0));
            Map<String, Double> v = samples(scrape(server.port(), null));
            assertThat(v).containsEntry("fsdp4j_loss{job_name=\"sft-7b\"}", 4.0)
                    .containsEntry("fsdp4j_steps_total{job_name=\"sft-7b\"}", 1.0);
            assertThat(v.keySet()).allMatch(k -> k.contains("{job_name=\"sft-7b\"}"));
        }
    }

    @Test
    void answersInTextWhatEverFormatIsAskedFor() throws Exception {
        try (var server = MetricsServer.bind(0, null)) {
            // Prometheus asks for protobuf first when native histograms are on; it reads what Content-Type says
            var proto = get(server.port(), "application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;"
                    + "encoding=delimited;q=0.6,text/plain;version=0.0.4;q=0.3");
            assertThat(proto.headers().firstValue("Content-Type")).hasValueSatisfying(
                    type -> assertThat(type).startsWith("text/plain; version=0.0.4"));
            assertThat(samples(proto.body())).containsKey("fsdp4j_loss");
            var openMetrics = get(server.port(), "application/openmetrics-text;version=1.0.0;q=0.5,*/*;q=0.1");
            assertThat(openMetrics.headers().firstValue("Content-Type")).hasValueSatisfying(
                    type -> assertThat(type).startsWith("application/openmetrics-text; version=1.0.0"));
            assertThat(openMetrics.body()).contains("# TYPE fsdp4j_steps counter").endsWith("# EOF\n");
            var head = HTTP.send(HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + server.port() + "/metrics"))
                    .method("HEAD", HttpRequest.BodyPublishers.noBody()).build(), HttpResponse.BodyHandlers.ofString());
            assertThat(head.statusCode()).isEqualTo(200);
            var post = HTTP.send(HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + server.port() + "/metrics"))
                    .POST(HttpRequest.BodyPublishers.ofString("x")).build(), HttpResponse.BodyHandlers.ofString());
            assertThat(post.statusCode()).isEqualTo(405);
        }
    }

    @Test
    void aPortInUseIsAUserErrorNamingIt() throws Exception {
        try (var taken = new ServerSocket(0)) {
            int port = taken.getLocalPort();
            assertThatThrownBy(() -> MetricsServer.start(port, null)).isInstanceOf(UserError.class)
                    .hasMessageStartingWith("log.prometheus_port " + port + ": ")
                    .hasMessageNotContaining("\n");
        }
    }

    @Test
    void portZeroIsOff() {
        try (var server = MetricsServer.start(0, null)) {
            assertThat(server.enabled()).isFalse();
            assertThat(server.port()).isZero();
            server.record(StepMetrics.of(1, 4.0, 2.0, 1e-4, 1000, 900, 0.5, 1, Double.NaN, 1.0));
        }
        assertThatThrownBy(() -> MetricsServer.start(70000, null)).isInstanceOf(UserError.class)
                .hasMessageContaining("70000");
    }

    /** The example alert rules parse and use only series that the endpoint serves (and Prometheus's own up). */
    @Test
    void theExampleAlertRulesNameServedMetrics() throws Exception {
        var yaml = new com.fasterxml.jackson.dataformat.yaml.YAMLMapper();
        var rules = yaml.readTree(java.nio.file.Path.of("examples/prometheus/alerts.yml").toFile()).at("/groups/0/rules");
        assertThat(rules).extracting(r -> r.get("alert").asText()).contains("Fsdp4jMfuDrop");
        var config = yaml.readTree(java.nio.file.Path.of("examples/prometheus/prometheus.yml").toFile());
        assertThat(config.get("rule_files").get(0).asText()).isEqualTo("alerts.yml");
        try (var server = MetricsServer.bind(0, null)) {
            var served = samples(scrape(server.port(), null)).keySet();
            for (var rule : rules) {
                var names = java.util.regex.Pattern.compile("fsdp4j_[a-z_]+").matcher(rule.get("expr").asText())
                        .results().map(java.util.regex.MatchResult::group).toList();
                assertThat(names).as("series in %s", rule.get("alert").asText()).isNotEmpty();
                assertThat(served).as("served series").containsAll(names);
            }
        }
    }
}
