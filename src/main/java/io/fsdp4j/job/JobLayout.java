package io.fsdp4j.job;

import io.fsdp4j.UserError;
import io.fsdp4j.config.DistSection;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.stream.Stream;

/**
 * Where this process stands in a job: {@code nnodes} nodes, each running {@code procsPerNode} processes, each
 * hosting {@code ranksPerProc} ranks as threads. Processes and ranks are numbered node by node: process
 * {@code nodeRank * procsPerNode + localProc} hosts the global ranks {@code [process * ranksPerProc, +ranksPerProc)},
 * so with {@code fsdp.shard_size} = ranks per node the shard groups of a hybrid mesh stay inside a node.
 *
 * <p>{@link #resolve} reads it, first match wins:
 * <ol>
 *   <li>torchrun-style variables, when {@code RANK} and {@code WORLD_SIZE} are set ({@code fsdp4j launch} sets
 *       them for its children): one process per {@code RANK}, {@code LOCAL_WORLD_SIZE} of them on a node;</li>
 *   <li>Slurm's, when {@code SLURM_PROCID} and {@code SLURM_NTASKS} are set (a task of {@code srun}): one
 *       process per task, tasks placed block-wise (the default);</li>
 *   <li>the config ({@code dist.nnodes}, {@code dist.node_rank}): one process per node;</li>
 *   <li>otherwise a single process hosting {@code dist.ranks} ranks.</li>
 * </ol>
 * {@code dist.ranks} (ranks on a node) is shared by the processes of a node. The rendezvous address is
 * {@code dist.rdzv}, else {@code MASTER_ADDR:MASTER_PORT}, else (Slurm) the first host of the job's node list and
 * port {@value #DEFAULT_PORT}. A config value that contradicts the environment is an error, not a silent choice:
 * {@code dist.nnodes} and {@code dist.node_rank} count as set when they differ from their defaults (1 and 0).
 *
 * @param source where the layout came from, for messages: "single process", "config", "torchrun", "slurm"
 */
public record JobLayout(int nnodes, int nodeRank, int procsPerNode, int localProc, int ranksPerProc,
                        String rdzvHost, int rdzvPort, String source) {

    /** The rendezvous port when nothing names one (as torchrun's). */
    public static final int DEFAULT_PORT = 29500;

    public JobLayout {
        if (nnodes < 1 || nodeRank < 0 || nodeRank >= nnodes || procsPerNode < 1 || localProc < 0
                || localProc >= procsPerNode || ranksPerProc < 1) {
            throw new IllegalArgumentException("impossible job layout: " + nnodes + " nodes, node " + nodeRank + ", "
                    + procsPerNode + " processes per node, local " + localProc + ", " + ranksPerProc + " ranks each");
        }
        if (nnodes * procsPerNode > 1 && (rdzvHost == null || rdzvPort < 1 || rdzvPort > 65535)) {
            throw new IllegalArgumentException("a job of several processes needs a rendezvous address");
        }
    }

    /** One process hosting {@code ranks} ranks: no rendezvous. */
    public static JobLayout singleProcess(int ranks) {
        return new JobLayout(1, 0, 1, 0, ranks, null, 0, "single process");
    }

    /** Processes in the job. */
    public int processes() {
        return nnodes * procsPerNode;
    }

    /** This process's index in the job, 0..processes-1. */
    public int process() {
        return nodeRank * procsPerNode + localProc;
    }

    public int ranksPerNode() {
        return procsPerNode * ranksPerProc;
    }

    public int worldSize() {
        return processes() * ranksPerProc;
    }

    /** The first global rank this process hosts. */
    public int firstRank() {
        return process() * ranksPerProc;
    }

    /** The global ranks this process hosts, ascending. */
    public List<Integer> localRanks() {
        List<Integer> ranks = new ArrayList<>();
        for (int i = 0; i < ranksPerProc; i++) {
            ranks.add(firstRank() + i);
        }
        return List.copyOf(ranks);
    }

    /** More than one process: the ranks reach each other over the network ({@link TcpWorld}). */
    public boolean multiProcess() {
        return processes() > 1;
    }

    /** The process that serves the rendezvous store and reports for the job. */
    public boolean firstProcess() {
        return process() == 0;
    }

    /** {@code host:port}, IPv6 hosts in brackets. */
    public String rdzv() {
        return rdzvHost == null ? null : hostPort(rdzvHost, rdzvPort);
    }

    /** "node 1 (ranks 2-3)" or, with several processes a node, "process 3 (node 1, ranks 6-7)". */
    public String describeProcess(int process) {
        int first = process * ranksPerProc;
        String ranks = ranksPerProc == 1 ? "rank " + first : "ranks " + first + "-" + (first + ranksPerProc - 1);
        return procsPerNode == 1 ? "node " + process + " (" + ranks + ")"
                : "process " + process + " (node " + process / procsPerNode + ", " + ranks + ")";
    }

    /** "node(s) 1, 3 of 4 (ranks 2-3, 6-7)": for messages that say who is missing. */
    public String describeProcesses(List<Integer> processes) {
        List<String> ids = new ArrayList<>(), ranks = new ArrayList<>();
        for (int p : processes) {
            ids.add(Integer.toString(p));
            int first = p * ranksPerProc;
            ranks.add(ranksPerProc == 1 ? Integer.toString(first) : first + "-" + (first + ranksPerProc - 1));
        }
        String what = procsPerNode == 1 ? "node(s) " : "process(es) ";
        return what + String.join(", ", ids) + " of " + processes() + " (rank" + (ranksPerProc == 1 && processes.size() == 1
                ? " " : "s ") + String.join(", ", ranks) + ")";
    }

    // ---- resolution -----------------------------------------------------------------------------------

    /** The layout of this process from the config's {@code dist.*} and the environment (see the class comment). */
    public static JobLayout resolve(DistSection dist, Map<String, String> env) {
        return resolve(dist.ranks(), dist.nnodes(), dist.nodeRank(), dist.rdzv(), env);
    }

    /**
     * The same from plain values: {@code ranksPerNode} = dist.ranks, {@code nnodes} and {@code nodeRank} as the
     * config has them (1 and 0 when not set), {@code rdzv} "host:port" or null.
     */
    public static JobLayout resolve(int ranksPerNode, int nnodes, int nodeRank, String rdzv, Map<String, String> env) {
        Procs procs = torchrun(env);
        if (procs == null) {
            procs = slurm(env);
        }
        Address address = address(rdzv, env, procs);
        if (procs == null) {
            if (nnodes == 1 && nodeRank == 0) {
                return singleProcess(ranksPerNode);
            }
            if (address == null) {
                throw new UserError("dist.nnodes=" + nnodes + " needs the rendezvous address of node 0: set dist.rdzv="
                        + "HOST:PORT (or MASTER_ADDR and MASTER_PORT)");
            }
            return new JobLayout(nnodes, nodeRank, 1, 0, ranksPerNode, address.host(), address.port(), "config");
        }
        if (nnodes != 1 && nnodes != procs.nnodes()) {
            throw new UserError("dist.nnodes=" + nnodes + " disagrees with the " + procs.source() + " variables ("
                    + procs.nnodes() + " node(s): " + procs.evidence() + "); leave dist.nnodes out or make them agree");
        }
        if (nodeRank != 0 && nodeRank != procs.nodeRank()) {
            throw new UserError("dist.node_rank=" + nodeRank + " disagrees with the " + procs.source()
                    + " variables (node " + procs.nodeRank() + ": " + procs.evidence()
                    + "); leave dist.node_rank out or make them agree");
        }
        if (ranksPerNode % procs.perNode() != 0) {
            throw new UserError("dist.ranks=" + ranksPerNode + " (ranks on a node) does not split evenly among the "
                    + procs.perNode() + " processes on a node (" + procs.evidence() + "); set dist.ranks to a multiple of "
                    + procs.perNode());
        }
        int ranksPerProc = ranksPerNode / procs.perNode();
        if (procs.nnodes() * procs.perNode() == 1) {
            return singleProcess(ranksPerProc);
        }
        if (address == null) {
            throw new UserError("the " + procs.source() + " variables describe a job of " + procs.nnodes() * procs.perNode()
                    + " processes but no rendezvous address is set: set MASTER_ADDR and MASTER_PORT, or dist.rdzv");
        }
        return new JobLayout(procs.nnodes(), procs.nodeRank(), procs.perNode(), procs.localProc(), ranksPerProc,
                address.host(), address.port(), procs.source());
    }

    /**
     * The rendezvous address: dist.rdzv, else MASTER_ADDR:MASTER_PORT, else under Slurm the first node of the job
     * (MASTER_ADDR or MASTER_PORT alone replace its host or port); null when none applies. dist.rdzv and the
     * MASTER_ variables must agree when both are set.
     */
    private static Address address(String rdzv, Map<String, String> env, Procs procs) {
        Address configured = rdzv == null || rdzv.isBlank() ? null : Address.parse(rdzv, "dist.rdzv");
        String host = blankToNull(env.get("MASTER_ADDR")), port = blankToNull(env.get("MASTER_PORT"));
        boolean slurm = procs != null && procs.source().equals("slurm");
        if (!slurm && (host == null) != (port == null)) {
            throw new UserError((host == null ? "MASTER_PORT" : "MASTER_ADDR") + " is set but "
                    + (host == null ? "MASTER_ADDR" : "MASTER_PORT") + " is not; set both");
        }
        Address master = host != null && port != null ? new Address(host, Address.port(port, "MASTER_PORT")) : null;
        if (configured != null && master != null && !configured.sameAs(master)) {
            throw new UserError("dist.rdzv=" + rdzv.strip() + " disagrees with MASTER_ADDR:MASTER_PORT=" + master
                    + "; set one of them, or the same address in both");
        }
        if (configured != null || master != null) {
            return configured != null ? configured : master;
        }
        if (slurm) {
            String nodeList = slurmNodeList(env);
            if (host == null && nodeList == null) {
                return null;
            }
            return new Address(host != null ? host : firstNode(nodeList),
                    port != null ? Address.port(port, "MASTER_PORT") : DEFAULT_PORT);
        }
        return null;
    }

    /** The nodes of this job step (the first runs task 0), else of the job. */
    private static String slurmNodeList(Map<String, String> env) {
        return Stream.of("SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST", "SLURM_NODELIST").map(env::get)
                .filter(v -> v != null && !v.isBlank()).findFirst().orElse(null);
    }

    private static String blankToNull(String s) {
        return s == null || s.isBlank() ? null : s.strip();
    }

    /**
     * The nodes of a job as {@code fsdp4j launch} sees them, one launcher a node: its flags ({@code nnodes},
     * {@code nodeRank} as given, 1 and 0 when not; {@code rdzv} or null), else torchrun-style variables (one
     * process a node, as a Kubernetes operator sets them for each pod), else Slurm's ({@code srun
     * --ntasks-per-node=1}), else this node alone. Same precedence and checks as {@link #resolve}.
     */
    public static Nodes resolveNodes(int nnodes, int nodeRank, String rdzv, Map<String, String> env) {
        Procs procs = torchrun(env);
        if (procs == null) {
            procs = slurm(env);
        }
        Address address = address(rdzv, env, procs);
        if (procs == null) {
            if (nnodes > 1 && address == null) {
                throw new UserError("--nnodes " + nnodes + " needs the rendezvous address of node 0: --rdzv HOST:PORT"
                        + " (or MASTER_ADDR and MASTER_PORT)");
            }
            if (nodeRank >= nnodes) {
                throw new UserError("--node-rank " + nodeRank + " is not below --nnodes " + nnodes);
            }
            return new Nodes(nnodes, nodeRank, address, nnodes > 1 || nodeRank > 0 ? "flags" : "single node");
        }
        if (procs.perNode() != 1) {
            throw new UserError("fsdp4j launch runs once a node and starts the node's processes itself, but the "
                    + procs.source() + " variables say " + procs.perNode() + " processes a node (" + procs.evidence()
                    + "); start one launch a node (srun --ntasks-per-node=1)");
        }
        if (nnodes != 1 && nnodes != procs.nnodes() || nodeRank != 0 && nodeRank != procs.nodeRank()) {
            throw new UserError("--nnodes " + nnodes + " --node-rank " + nodeRank + " disagree with the " + procs.source()
                    + " variables (node " + procs.nodeRank() + " of " + procs.nnodes() + ": " + procs.evidence() + ")");
        }
        if (procs.nnodes() > 1 && address == null) {
            throw new UserError("the " + procs.source() + " variables describe " + procs.nnodes() + " nodes but no "
                    + "rendezvous address is set: --rdzv HOST:PORT, or MASTER_ADDR and MASTER_PORT");
        }
        return new Nodes(procs.nnodes(), procs.nodeRank(), address, procs.source());
    }

    /** The nodes of a job, for its launcher. rdzv: null for a job of one node that named none. */
    public record Nodes(int nnodes, int nodeRank, Address rdzv, String source) {}

    /** What a scheduler's variables say about the processes. evidence: the values, for messages. */
    private record Procs(int nnodes, int nodeRank, int perNode, int localProc, String source, String evidence) {}

    private static Procs torchrun(Map<String, String> env) {
        String rank = env.get("RANK"), worldSize = env.get("WORLD_SIZE");
        if (rank == null && worldSize == null) {
            return null;
        }
        if (rank == null || worldSize == null) {
            throw new UserError((rank == null ? "WORLD_SIZE" : "RANK") + " is set but "
                    + (rank == null ? "RANK" : "WORLD_SIZE") + " is not; torchrun-style jobs need both");
        }
        int world = positive(env, "WORLD_SIZE");
        int r = nonNegative(env, "RANK");
        if (r >= world) {
            throw new UserError("RANK=" + r + " is not below WORLD_SIZE=" + world);
        }
        String localRank = env.get("LOCAL_RANK"), localWorld = env.get("LOCAL_WORLD_SIZE");
        if ((localRank == null) != (localWorld == null)) {
            throw new UserError((localRank == null ? "LOCAL_WORLD_SIZE" : "LOCAL_RANK") + " is set but "
                    + (localRank == null ? "LOCAL_RANK" : "LOCAL_WORLD_SIZE") + " is not; set both or neither");
        }
        int perNode = localWorld == null ? 1 : positive(env, "LOCAL_WORLD_SIZE");
        int local = localRank == null ? 0 : nonNegative(env, "LOCAL_RANK");
        String evidence = "RANK=" + r + ", WORLD_SIZE=" + world
                + (localWorld == null ? "" : ", LOCAL_RANK=" + local + ", LOCAL_WORLD_SIZE=" + perNode);
        if (world % perNode != 0) {
            throw new UserError("WORLD_SIZE=" + world + " is not a multiple of LOCAL_WORLD_SIZE=" + perNode
                    + "; fsdp4j needs the same number of processes on every node");
        }
        if (local != r % perNode) {
            throw new UserError("LOCAL_RANK=" + local + " does not match RANK=" + r + " with LOCAL_WORLD_SIZE=" + perNode
                    + " (" + r % perNode + " expected): ranks must be numbered node by node");
        }
        return new Procs(world / perNode, r / perNode, perNode, local, "torchrun", evidence);
    }

    private static Procs slurm(Map<String, String> env) {
        if (env.get("SLURM_PROCID") == null || env.get("SLURM_NTASKS") == null) {
            return null;
        }
        int tasks = positive(env, "SLURM_NTASKS");
        int task = nonNegative(env, "SLURM_PROCID");
        if (task >= tasks) {
            throw new UserError("SLURM_PROCID=" + task + " is not below SLURM_NTASKS=" + tasks);
        }
        String nodeList = slurmNodeList(env);
        int nodes = 1;
        String nodesVariable = Stream.of("SLURM_STEP_NUM_NODES", "SLURM_NNODES", "SLURM_JOB_NUM_NODES")
                .filter(v -> env.get(v) != null).findFirst().orElse(null);
        if (nodesVariable != null) {
            nodes = positive(env, nodesVariable);
        } else if (nodeList != null) {
            nodes = expandNodeList(nodeList).size();
        }
        // the job's nodes may outnumber the step's tasks (srun -n1 on a 2-node allocation): only nodes with tasks count
        nodes = Math.min(nodes, tasks);
        if (tasks % nodes != 0) {
            throw new UserError("Slurm started " + tasks + " tasks on " + nodes + " nodes; fsdp4j needs the same number"
                    + " of tasks on every node (srun --ntasks-per-node)");
        }
        int perNode = tasks / nodes;
        int node = env.get("SLURM_NODEID") == null ? task / perNode : nonNegative(env, "SLURM_NODEID");
        int local = env.get("SLURM_LOCALID") == null ? task % perNode : nonNegative(env, "SLURM_LOCALID");
        String evidence = "SLURM_PROCID=" + task + ", SLURM_NTASKS=" + tasks + ", " + nodes + " node(s)";
        if (node != task / perNode || local != task % perNode) {
            throw new UserError("Slurm placed task " + task + " as task " + local + " of node " + node + ", but fsdp4j "
                    + "needs tasks numbered node by node (" + perNode + " a node); use srun --distribution=block");
        }
        return new Procs(nodes, node, perNode, local, "slurm", evidence);
    }

    private static int positive(Map<String, String> env, String name) {
        int v = integer(env, name);
        if (v < 1) {
            throw new UserError(name + "=" + v + " must be at least 1");
        }
        return v;
    }

    private static int nonNegative(Map<String, String> env, String name) {
        int v = integer(env, name);
        if (v < 0) {
            throw new UserError(name + "=" + v + " must not be negative");
        }
        return v;
    }

    private static int integer(Map<String, String> env, String name) {
        String value = env.get(name).strip();
        try {
            return Integer.parseInt(value);
        } catch (NumberFormatException e) {
            throw new UserError(name + "='" + value + "' is not an integer");
        }
    }

    /** "30 s", "0.5 s": a wait for messages. */
    static String seconds(java.time.Duration d) {
        long ms = d.toMillis();
        return (ms % 1000 == 0 ? Long.toString(ms / 1000) : String.format(Locale.ROOT, "%.1f", ms / 1000.0)) + " s";
    }

    static String hostPort(String host, int port) {
        return (host.contains(":") ? "[" + host + "]" : host) + ":" + port;
    }

    /** A host and port, parsed from "host:port" or "[v6]:port". */
    public record Address(String host, int port) {
        public static Address parse(String text, String what) {
            String s = text.strip();
            String host, port;
            if (s.startsWith("[")) {
                int close = s.indexOf(']');
                if (close < 0 || close + 1 >= s.length() || s.charAt(close + 1) != ':') {
                    throw bad(text, what);
                }
                host = s.substring(1, close);
                port = s.substring(close + 2);
            } else {
                int colon = s.lastIndexOf(':');
                if (colon <= 0 || s.indexOf(':') != colon) {
                    throw bad(text, what);
                }
                host = s.substring(0, colon);
                port = s.substring(colon + 1);
            }
            if (host.isBlank()) {
                throw bad(text, what);
            }
            return new Address(host, port(port, what));
        }

        static int port(String text, String what) {
            try {
                int p = Integer.parseInt(text);
                if (p >= 1 && p <= 65535) {
                    return p;
                }
            } catch (NumberFormatException e) {
                // reported below
            }
            throw new UserError(what + ": '" + text + "' is not a port (1-65535)");
        }

        private static UserError bad(String text, String what) {
            return new UserError(what + "='" + text + "' is not HOST:PORT (e.g. node0:" + DEFAULT_PORT + ")");
        }

        boolean sameAs(Address other) {
            return port == other.port && host.toLowerCase(Locale.ROOT).equals(other.host.toLowerCase(Locale.ROOT));
        }

        @Override
        public String toString() {
            return hostPort(host, port);
        }
    }

    // ---- Slurm host lists -----------------------------------------------------------------------------

    /** The first host of a Slurm node list such as {@code node[01-04,07],gpu3}. */
    public static String firstNode(String nodeList) {
        return expandNodeList(nodeList).getFirst();
    }

    /**
     * The hosts of a Slurm node list in its compact form: comma-separated names, each with any number of bracketed
     * sets of numbers and ranges ({@code rack[1-2]-n[01,03]}), zero padding kept.
     */
    public static List<String> expandNodeList(String nodeList) {
        List<String> hosts = new ArrayList<>();
        for (String pattern : splitTopLevel(nodeList.strip(), nodeList)) {
            hosts.addAll(expandPattern(pattern, nodeList));
        }
        if (hosts.isEmpty()) {
            throw new UserError("the Slurm node list '" + nodeList + "' names no host");
        }
        return hosts;
    }

    private static List<String> splitTopLevel(String s, String whole) {
        List<String> parts = new ArrayList<>();
        int depth = 0, start = 0;
        for (int i = 0; i < s.length(); i++) {
            char c = s.charAt(i);
            if (c == '[') {
                depth++;
            } else if (c == ']') {
                depth--;
            }
            if (depth < 0 || depth > 1) {
                throw badList(whole);
            }
            if (c == ',' && depth == 0) {
                parts.add(s.substring(start, i));
                start = i + 1;
            }
        }
        if (depth != 0) {
            throw badList(whole);
        }
        parts.add(s.substring(start));
        parts.removeIf(String::isBlank);
        return parts;
    }

    private static List<String> expandPattern(String pattern, String whole) {
        int open = pattern.indexOf('[');
        if (open < 0) {
            return List.of(pattern.strip());
        }
        int close = pattern.indexOf(']', open);
        String prefix = pattern.substring(0, open);
        List<String> rest = expandPattern(pattern.substring(close + 1), whole);
        List<String> hosts = new ArrayList<>();
        for (String item : pattern.substring(open + 1, close).split(",")) {
            String[] bounds = item.strip().split("-", -1);
            if (bounds.length > 2 || bounds[0].isEmpty() || !bounds[0].chars().allMatch(Character::isDigit)
                    || bounds.length == 2 && (bounds[1].isEmpty() || !bounds[1].chars().allMatch(Character::isDigit))) {
                throw badList(whole);
            }
            long lo = Long.parseLong(bounds[0]), hi = bounds.length == 2 ? Long.parseLong(bounds[1]) : lo;
            if (hi < lo || hi - lo > 100_000) {
                throw badList(whole);
            }
            int width = bounds[0].length();
            for (long n = lo; n <= hi; n++) {
                String number = String.format(Locale.ROOT, "%0" + width + "d", n);
                for (String tail : rest) {
                    hosts.add(prefix + number + tail);
                }
            }
        }
        return hosts;
    }

    private static UserError badList(String whole) {
        return new UserError("cannot read the Slurm node list '" + whole + "' (expected e.g. node[01-04,07],gpu3)");
    }
}
