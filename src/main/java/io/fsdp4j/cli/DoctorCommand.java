package io.fsdp4j.cli;

import io.fsdp4j.doctor.Doctor;
import io.fsdp4j.report.MetricsFile;
import java.util.concurrent.Callable;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;
import picocli.CommandLine.ParentCommand;

/** {@code fsdp4j doctor [--json] [--no-tests]}. */
@Command(
        name = "doctor",
        header = "What fsdp4j finds on this machine and will use, or why not.",
        mixinStandardHelpOptions = true,
        versionProvider = VersionProvider.class,
        usageHelpAutoWidth = true,
        description = {
            "What fsdp4j finds on this machine and will use: JDK, native libraries (path and version, or why "
                    + "not found), driver, GPUs with their memory and the other processes holding some, NVLink "
                    + "topology, NCCL; then a short GPU health test (a bf16 matrix product checked and timed, device "
                    + "memory bandwidth, an all-reduce across the local GPUs) and a verdict with its reason.",
            "Exit status: 0 when the GPUs are healthy or there is none (the CPU backend), 1 when a GPU is "
                    + "degraded (rates well below the expected ones, memory held by other processes) or failed a test.",
        })
final class DoctorCommand implements Callable<Integer> {
    @ParentCommand
    private Main main;

    @Option(names = "--json", description = "print one JSON object instead of lines")
    private boolean json;

    @Option(names = "--no-tests", description = "report what is installed, without the GPU health tests")
    private boolean noTests;

    @Override
    public Integer call() {
        Doctor.Examination exam = Doctor.examine(!noTests);
        if (json) {
            main.out().println(MetricsFile.json(exam.json()));
        } else {
            exam.lines().forEach(main.out()::println);
        }
        return exam.verdict().exitCode();
    }
}
