package io.fsdp4j.config;

import java.nio.file.Path;

/** One dataset of a weighted mix ({@code data.train} as a YAML list of {@code {path, weight}}). */
public record WeightedPath(Path path, double weight) {}
