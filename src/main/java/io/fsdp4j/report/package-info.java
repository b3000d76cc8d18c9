/**
 * Reporting a training run while it runs and after it: {@link io.fsdp4j.report.StepMetrics} is one step's numbers
 * (the record of the metrics JSONL), {@link io.fsdp4j.report.StepReporter} shows them on the terminal (a progress
 * bar when standard output is one, plain lines otherwise), {@link io.fsdp4j.report.MetricsServer} serves them to
 * Prometheus ({@code log.prometheus_port}), and {@link io.fsdp4j.report.Plots} draws a metrics JSONL as PNG charts.
 * The package knows nothing of models or ranks: the training loop hands it numbers. {@code docs/metrics.md} lists
 * every key and metric name.
 *
 * <p>May use: config, tensor, safetensors; used by every package above it.
 */
package io.fsdp4j.report;
