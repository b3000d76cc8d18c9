package io.fsdp4j.cli;

import io.fsdp4j.ExitStatus;
import io.fsdp4j.UserError;
import io.fsdp4j.job.JobLayout;
import io.fsdp4j.job.JobToken;
import io.fsdp4j.job.Launcher;
import io.fsdp4j.job.NodeLeftOutException;
import java.io.PrintWriter;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.Callable;
import picocli.CommandLine.Command;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Option;
import picocli.CommandLine.Parameters;
import picocli.CommandLine.ParentCommand;
import picocli.CommandLine.Spec;

/** {@code fsdp4j launch [--nnodes N] [--node-rank K] [--rdzv HOST:PORT] [--nproc-per-node P] -- train ...}. */
@Command(
        name = "launch",
        header = "Start the processes of a multi-process or multi-node job (run once on every node).",
        mixinStandardHelpOptions = true,
        versionProvider = VersionProvider.class,
        usageHelpAutoWidth = true,
        description = {
            "Start the processes of a multi-process or multi-node job: run once on every node; starts this node's "
                    + "process(es) of COMMAND (an fsdp4j command, usually train), tells each its place in the job, "
                    + "prefixes their output with it, and stops them all when one fails.",
            "Without flags the layout comes from torchrun-style variables (MASTER_ADDR, MASTER_PORT, RANK, "
                    + "WORLD_SIZE: one launch per node) or from Slurm (srun --ntasks-per-node=1); else this node alone. "
                    + "The processes of a node share its dist.ranks ranks. Every node must have the same "
                    + JobToken.ENV + " (made up here for a job of one node).",
        })
final class LaunchCommand implements Callable<Integer> {
    @ParentCommand
    private Main main;

    @Spec
    private CommandSpec spec;

    @Option(names = "--nnodes", paramLabel = "N", defaultValue = "1", description = "nodes in the job (default: 1)")
    private int nnodes;

    @Option(names = "--node-rank", paramLabel = "K", defaultValue = "0", description = "this node's index, 0..N-1")
    private int nodeRank;

    @Option(names = "--rdzv", paramLabel = "HOST:PORT",
            description = "node 0's address for the rendezvous (a free port on this host for a job of one node)")
    private String rdzv;

    @Option(names = "--nproc-per-node", paramLabel = "P", defaultValue = "1",
            description = "processes to start on this node (default: 1, hosting all of the node's ranks)")
    private int procsPerNode;

    @Option(names = "--max-restarts", paramLabel = "R", defaultValue = "0",
            description = "start the job again up to R times after a failure (with checkpoint.resume=auto, a train "
                    + "command continues from its last checkpoint)")
    private int maxRestarts;

    @Option(names = "--emulate-nodes", paramLabel = "N", defaultValue = "0",
            description = "emulate N nodes on this machine: start every node's process(es) here, each node with its own"
                    + " NCCL_HOSTID and NCCL on loopback sockets (NCCL_SOCKET_IFNAME=lo unless set), so that traffic"
                    + " between them takes NCCL's network transport; dist.ranks is then the ranks of one node")
    private int emulateNodes;

    @Option(names = io.fsdp4j.preflight.Preflight.SKIP_OPTION,
            description = "passed to a train command: its processes start without comparing their versions, model, "
                    + "data and config (logged)")
    private boolean skipPreflight;

    @Option(names = "--exclude-unhealthy",
            description = "passed to a train command: the job starts without nodes whose GPUs fail the preflight's "
                    + "health test, when the layout allows (this launch then ends with status 4 on such a node)")
    private boolean excludeUnhealthy;

    @Parameters(arity = "1..*", paramLabel = "COMMAND", description = "after '--': the fsdp4j command to run, with its arguments")
    private List<String> command = new ArrayList<>();

    /** Everything after the first positional argument is the child's, options included. */
    @Spec
    void stopAtCommand(CommandSpec commandSpec) {
        commandSpec.parser().stopAtPositional(true);
        commandSpec.usageMessage().footer("", "Examples:",
                "  fsdp4j launch --nproc-per-node 2 -- train run.yaml          two processes on this host",
                "  fsdp4j launch --nnodes 2 --node-rank 0 --rdzv node0:29500 -- train run.yaml",
                "                                                      (and --node-rank 1 on the other node)",
                "  srun --ntasks-per-node=1 fsdp4j launch -- train run.yaml   under Slurm",
                "  fsdp4j launch --emulate-nodes 2 -- train run.yaml         two nodes emulated on this machine",
                "See examples/multinode/ for Slurm and Kubernetes.");
    }

    @Override
    public Integer call() {
        if (procsPerNode < 1) {
            throw new UserError("--nproc-per-node must be at least 1");
        }
        if (maxRestarts < 0) {
            throw new UserError("--max-restarts must not be negative");
        }
        if (nnodes < 1 || nodeRank < 0) {
            throw new UserError("--nnodes must be at least 1 and --node-rank not negative");
        }
        String sub = command.getFirst();
        var commands = spec.parent().subcommands().keySet();
        if (sub.equals("launch") || !commands.contains(sub)) {
            throw new UserError("launch: '" + sub + "' is not a command to launch; e.g. fsdp4j launch --nproc-per-node 2 "
                    + "-- train run.yaml");
        }
        if (skipPreflight && !sub.equals("train")) {
            throw new UserError("launch: " + io.fsdp4j.preflight.Preflight.SKIP_OPTION + " applies to train, not to " + sub);
        }
        if (excludeUnhealthy && !sub.equals("train")) {
            throw new UserError("launch: --exclude-unhealthy applies to train, not to " + sub);
        }
        Map<String, String> env = System.getenv();
        if (emulateNodes < 0 || emulateNodes > 0 && (nnodes != 1 || nodeRank != 0 || rdzv != null)) {
            throw new UserError("--emulate-nodes N starts every node on this machine: give it without --nnodes, "
                    + "--node-rank and --rdzv");
        }
        JobLayout.Nodes nodes = emulateNodes > 0 ? new JobLayout.Nodes(emulateNodes, 0, null, "emulated on this machine")
                : JobLayout.resolveNodes(nnodes, nodeRank, rdzv, env);
        String token;
        String tokenSource;
        if (env.get(JobToken.ENV) != null && !env.get(JobToken.ENV).isBlank()) {
            token = env.get(JobToken.ENV).strip();
            tokenSource = "from " + JobToken.ENV;
        } else if (nodes.nnodes() == 1 || emulateNodes > 0) {
            token = JobToken.generate();
            tokenSource = "generated";
        } else {
            token = JobToken.require(env); // refuses, saying how to set one
            tokenSource = "";
        }
        PrintWriter err = spec.commandLine().getErr();
        err.println("fsdp4j launch: " + (emulateNodes > 0 ? "nodes 0-" + (emulateNodes - 1) : "node " + nodes.nodeRank())
                + " of " + nodes.nnodes() + " (" + nodes.source() + "), starting "
                + (emulateNodes > 0 ? emulateNodes : 1) * procsPerNode + " process(es) of " + nodes.nnodes() * procsPerNode
                + (nodes.rdzv() == null ? "" : ", rendezvous " + nodes.rdzv()) + ", job token " + JobToken.masked(token)
                + " (" + tokenSource + ")");
        err.flush();
        List<String> child = new ArrayList<>(Launcher.javaCommand(Main.class.getName()));
        child.addAll(command);
        if (skipPreflight) { // right after the command's name
            child.add(child.size() - command.size() + 1, io.fsdp4j.preflight.Preflight.SKIP_OPTION);
        }
        if (excludeUnhealthy) {
            child.add(child.size() - command.size() + 1, "--exclude-unhealthy");
        }
        var plan = new Launcher.Plan(nodes, procsPerNode, token, maxRestarts, child, Duration.ofSeconds(10),
                emulateNodes > 0);
        var out = main.out();
        Launcher.Outcome outcome = Launcher.run(plan, line -> {
            synchronized (out) {
                out.println(line);
            }
        }, line -> {
            synchronized (err) {
                err.println(line);
                err.flush();
            }
        });
        if (outcome.ok()) {
            return 0;
        }
        // the job's status, not bad input: a process's own status when it says what happened (2 bad input, 3
        // diverged, 4 left out, 6 stopped by a signal), else 5 (a process crashed, was killed or timed out)
        boolean others = outcome.status() != NodeLeftOutException.EXIT_STATUS && outcome.status() != ExitStatus.STOPPED
                && (procsPerNode > 1 || emulateNodes > 1);
        synchronized (err) {
            err.println((outcome.status() == ExitStatus.STOPPED ? "fsdp4j launch: " : "error: launch: ")
                    + outcome.failure() + (others ? "; the other processes were stopped" : ""));
            err.flush();
        }
        return outcome.exitStatus();
    }
}
