package io.fsdp4j.job;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.fsdp4j.UserError;
import io.fsdp4j.config.DeviceKind;
import io.fsdp4j.config.DistSection;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

class JobLayoutTest {

    private static DistSection dist(int ranks, int nnodes, int nodeRank, String rdzv) {
        return new DistSection(DeviceKind.CPU, ranks, nnodes, nodeRank, rdzv);
    }

    private static JobLayout resolve(DistSection d, Map<String, String> env) {
        return JobLayout.resolve(d, env);
    }

    @Test
    void noConfigNoEnvironmentIsOneProcessHostingEveryRank() {
        JobLayout l = resolve(dist(4, 1, 0, null), Map.of());
        assertThat(l).isEqualTo(JobLayout.singleProcess(4));
        assertThat(l.multiProcess()).isFalse();
        assertThat(l.localRanks()).containsExactly(0, 1, 2, 3);
        assertThat(l.worldSize()).isEqualTo(4);
    }

    @Test
    void configNamesTheNodes() {
        JobLayout l = resolve(dist(2, 3, 1, "node0:29400"), Map.of());
        assertThat(l).isEqualTo(new JobLayout(3, 1, 1, 0, 2, "node0", 29400, "config"));
        assertThat(l.process()).isEqualTo(1);
        assertThat(l.localRanks()).containsExactly(2, 3);
        assertThat(l.worldSize()).isEqualTo(6);
        assertThat(l.ranksPerNode()).isEqualTo(2);
        assertThat(l.rdzv()).isEqualTo("node0:29400");
    }

    @Test
    void configTakesTheAddressFromMasterVariables() {
        JobLayout l = resolve(dist(2, 2, 0, null), Map.of("MASTER_ADDR", "10.0.0.1", "MASTER_PORT", "1234"));
        assertThat(l.rdzvHost()).isEqualTo("10.0.0.1");
        assertThat(l.rdzvPort()).isEqualTo(1234);
        assertThat(l.source()).isEqualTo("config");
    }

    @Test
    void configOfSeveralNodesNeedsAnAddress() {
        assertThatThrownBy(() -> resolve(dist(2, 2, 1, null), Map.of()))
                .isInstanceOf(UserError.class).hasMessageContaining("dist.nnodes=2 needs").hasMessageContaining("dist.rdzv");
    }

    @Test
    void rdzvMustBeHostAndPort() {
        for (String bad : new String[] {"node0", "node0:", ":29500", "node0:x", "node0:70000", "a:b:c", "[::1]"}) {
            assertThatThrownBy(() -> resolve(dist(2, 2, 0, bad), Map.of())).as(bad).isInstanceOf(UserError.class)
                    .hasMessageContaining("dist.rdzv");
        }
        JobLayout v6 = resolve(dist(2, 2, 0, "[fe80::1]:29500"), Map.of());
        assertThat(v6.rdzvHost()).isEqualTo("fe80::1");
        assertThat(v6.rdzv()).isEqualTo("[fe80::1]:29500");
    }

    @Test
    void torchrunOneProcessPerNode() {
        var env = Map.of("MASTER_ADDR", "host0", "MASTER_PORT", "29500", "RANK", "1", "WORLD_SIZE", "2",
                "LOCAL_RANK", "0", "LOCAL_WORLD_SIZE", "1");
        JobLayout l = resolve(dist(4, 1, 0, null), env);
        assertThat(l).isEqualTo(new JobLayout(2, 1, 1, 0, 4, "host0", 29500, "torchrun"));
        assertThat(l.localRanks()).containsExactly(4, 5, 6, 7);
    }

    @Test
    void torchrunOneProcessPerGpuSharesTheNodesRanks() {
        var env = Map.of("MASTER_ADDR", "host0", "MASTER_PORT", "29500", "RANK", "6", "WORLD_SIZE", "8",
                "LOCAL_RANK", "2", "LOCAL_WORLD_SIZE", "4");
        JobLayout l = resolve(dist(4, 1, 0, null), env);
        assertThat(l).isEqualTo(new JobLayout(2, 1, 4, 2, 1, "host0", 29500, "torchrun"));
        assertThat(l.process()).isEqualTo(6);
        assertThat(l.localRanks()).containsExactly(6);
        assertThat(l.ranksPerNode()).isEqualTo(4);
        assertThat(l.describeProcess(6)).isEqualTo("process 6 (node 1, rank 6)");
    }

    @Test
    void torchrunWithoutLocalVariablesIsOneProcessPerNode() {
        var env = Map.of("MASTER_ADDR", "h", "MASTER_PORT", "1", "RANK", "2", "WORLD_SIZE", "3");
        assertThat(resolve(dist(2, 1, 0, null), env)).isEqualTo(new JobLayout(3, 2, 1, 0, 2, "h", 1, "torchrun"));
    }

    @Test
    void torchrunOfOneProcessIsASingleProcess() {
        var env = Map.of("RANK", "0", "WORLD_SIZE", "1", "LOCAL_RANK", "0", "LOCAL_WORLD_SIZE", "1");
        assertThat(resolve(dist(3, 1, 0, null), env)).isEqualTo(JobLayout.singleProcess(3));
    }

    @Test
    void inconsistentTorchrunVariablesAreRefused() {
        var base = Map.of("MASTER_ADDR", "h", "MASTER_PORT", "1");
        assertRefused(with(base, "RANK", "2", "WORLD_SIZE", "2"), "RANK=2 is not below WORLD_SIZE=2");
        assertRefused(with(base, "RANK", "0"), "RANK is set but WORLD_SIZE is not");
        assertRefused(with(base, "RANK", "x", "WORLD_SIZE", "2"), "RANK='x' is not an integer");
        assertRefused(with(base, "RANK", "1", "WORLD_SIZE", "6", "LOCAL_RANK", "1", "LOCAL_WORLD_SIZE", "4"),
                "WORLD_SIZE=6 is not a multiple of LOCAL_WORLD_SIZE=4");
        assertRefused(with(base, "RANK", "5", "WORLD_SIZE", "8", "LOCAL_RANK", "0", "LOCAL_WORLD_SIZE", "4"),
                "LOCAL_RANK=0 does not match RANK=5");
        assertRefused(with(base, "RANK", "1", "WORLD_SIZE", "8", "LOCAL_RANK", "1"), "LOCAL_RANK is set but LOCAL_WORLD_SIZE");
        assertRefused(Map.of("RANK", "1", "WORLD_SIZE", "2"), "no rendezvous address");
        assertRefused(Map.of("RANK", "1", "WORLD_SIZE", "2", "MASTER_ADDR", "h"), "MASTER_ADDR is set but MASTER_PORT is not");
        assertRefused(with(Map.of("MASTER_ADDR", "h", "MASTER_PORT", "0"), "RANK", "1", "WORLD_SIZE", "2"),
                "MASTER_PORT: '0' is not a port");
    }

    @Test
    void ranksOfANodeMustSplitAmongItsProcesses() {
        var env = Map.of("MASTER_ADDR", "h", "MASTER_PORT", "1", "RANK", "1", "WORLD_SIZE", "4",
                "LOCAL_RANK", "1", "LOCAL_WORLD_SIZE", "4");
        assertThatThrownBy(() -> resolve(dist(2, 1, 0, null), env)).isInstanceOf(UserError.class)
                .hasMessageContaining("dist.ranks=2").hasMessageContaining("multiple of 4");
    }

    @Test
    void configThatContradictsTheEnvironmentIsRefused() {
        var env = Map.of("MASTER_ADDR", "h", "MASTER_PORT", "29500", "RANK", "1", "WORLD_SIZE", "2");
        assertThatThrownBy(() -> resolve(dist(2, 4, 0, null), env)).isInstanceOf(UserError.class)
                .hasMessageContaining("dist.nnodes=4 disagrees with the torchrun variables (2 node(s)");
        assertThatThrownBy(() -> resolve(dist(2, 2, 0, "other:29500"), env)).isInstanceOf(UserError.class)
                .hasMessageContaining("dist.rdzv=other:29500 disagrees with MASTER_ADDR:MASTER_PORT=h:29500");
        var slurm = Map.of("SLURM_PROCID", "0", "SLURM_NTASKS", "2", "SLURM_NNODES", "2", "SLURM_NODEID", "0",
                "SLURM_LOCALID", "0", "SLURM_JOB_NODELIST", "n[1-2]");
        assertThatThrownBy(() -> resolve(dist(2, 2, 1, null), slurm)).isInstanceOf(UserError.class)
                .hasMessageContaining("dist.node_rank=1 disagrees with the slurm variables (node 0");
        // agreeing values are fine
        assertThat(resolve(dist(2, 2, 1, "H:29500"), env).nodeRank()).isEqualTo(1);
    }

    @Test
    void slurmOneTaskPerNode() {
        var env = Map.of("SLURM_PROCID", "1", "SLURM_NTASKS", "2", "SLURM_NNODES", "2", "SLURM_NODEID", "1",
                "SLURM_LOCALID", "0", "SLURM_JOB_NODELIST", "gpu[07-08]");
        JobLayout l = resolve(dist(8, 1, 0, null), env);
        assertThat(l).isEqualTo(new JobLayout(2, 1, 1, 0, 8, "gpu07", JobLayout.DEFAULT_PORT, "slurm"));
    }

    @Test
    void slurmTaskPerGpuAndAddressOverrides() {
        var env = Map.of("SLURM_PROCID", "5", "SLURM_NTASKS", "8", "SLURM_JOB_NUM_NODES", "2", "SLURM_NODEID", "1",
                "SLURM_LOCALID", "1", "SLURM_JOB_NODELIST", "a[1-2]", "MASTER_PORT", "4000");
        JobLayout l = resolve(dist(4, 1, 0, null), env);
        assertThat(l).isEqualTo(new JobLayout(2, 1, 4, 1, 1, "a1", 4000, "slurm"));
        assertThat(resolve(dist(4, 1, 0, "10.1.1.1:5000"), env).rdzv()).isEqualTo("10.1.1.1:5000");
        assertThat(resolve(dist(4, 1, 0, null), with(env, "MASTER_ADDR", "b9")).rdzv()).isEqualTo("b9:4000");
    }

    @Test
    void slurmNodeCountFromTheNodeListWhenNotGiven() {
        var env = Map.of("SLURM_PROCID", "2", "SLURM_NTASKS", "3", "SLURM_NODELIST", "x1,y[3-4]");
        assertThat(resolve(dist(1, 1, 0, null), env)).isEqualTo(new JobLayout(3, 2, 1, 0, 1, "x1", 29500, "slurm"));
    }

    @Test
    void torchrunVariablesWinOverSlurms() {
        var env = Map.of("SLURM_PROCID", "0", "SLURM_NTASKS", "1", "SLURM_JOB_NODELIST", "n1",
                "MASTER_ADDR", "n1", "MASTER_PORT", "29501", "RANK", "3", "WORLD_SIZE", "4",
                "LOCAL_RANK", "3", "LOCAL_WORLD_SIZE", "4");
        JobLayout l = resolve(dist(4, 1, 0, null), env);
        assertThat(l.source()).isEqualTo("torchrun");
        assertThat(l.process()).isEqualTo(3);
    }

    @Test
    void inconsistentSlurmVariablesAreRefused() {
        var base = Map.of("SLURM_JOB_NODELIST", "n[1-2]");
        assertRefused(with(base, "SLURM_PROCID", "3", "SLURM_NTASKS", "3", "SLURM_NNODES", "2"),
                "SLURM_PROCID=3 is not below SLURM_NTASKS=3");
        assertRefused(with(base, "SLURM_PROCID", "0", "SLURM_NTASKS", "3", "SLURM_NNODES", "2"),
                "Slurm started 3 tasks on 2 nodes");
        assertRefused(with(base, "SLURM_PROCID", "1", "SLURM_NTASKS", "4", "SLURM_NNODES", "2", "SLURM_NODEID", "1",
                "SLURM_LOCALID", "0"), "srun --distribution=block");
    }

    @Test
    void slurmNodeListsExpand() {
        assertThat(JobLayout.expandNodeList("node[01-04,07]"))
                .containsExactly("node01", "node02", "node03", "node04", "node07");
        assertThat(JobLayout.expandNodeList("a1,b[8-10],c")).containsExactly("a1", "b8", "b9", "b10", "c");
        assertThat(JobLayout.expandNodeList("rack[1-2]-n[01,03]"))
                .containsExactly("rack1-n01", "rack1-n03", "rack2-n01", "rack2-n03");
        assertThat(JobLayout.expandNodeList("gpu-[098-101]")).containsExactly("gpu-098", "gpu-099", "gpu-100", "gpu-101");
        assertThat(JobLayout.firstNode("node[01-04,07],login3")).isEqualTo("node01");
        assertThat(JobLayout.firstNode("host.example.com")).isEqualTo("host.example.com");
        for (String bad : new String[] {"node[01-", "node[a-b]", "node[3-1]", "n]1[", "", "n[1-2-3]"}) {
            assertThatThrownBy(() -> JobLayout.expandNodeList(bad)).as(bad).isInstanceOf(UserError.class)
                    .hasMessageContaining("Slurm node list");
        }
    }

    @Test
    void messagesNameNodesAndRanks() {
        JobLayout l = new JobLayout(2, 0, 1, 0, 2, "h", 1, "config");
        assertThat(l.describeProcesses(List.of(1))).isEqualTo("node(s) 1 of 2 (ranks 2-3)");
        assertThat(l.describeProcess(1)).isEqualTo("node 1 (ranks 2-3)");
        JobLayout four = new JobLayout(4, 0, 1, 0, 1, "h", 1, "config");
        assertThat(four.describeProcesses(List.of(1, 3))).isEqualTo("node(s) 1, 3 of 4 (ranks 1, 3)");
        assertThat(four.describeProcesses(List.of(2))).isEqualTo("node(s) 2 of 4 (rank 2)");
    }

    @Test
    void launcherNodesFromFlagsSlurmOrAlone() {
        assertThat(JobLayout.resolveNodes(1, 0, null, Map.of()))
                .isEqualTo(new JobLayout.Nodes(1, 0, null, "single node"));
        assertThat(JobLayout.resolveNodes(2, 1, "n0:29500", Map.of()))
                .isEqualTo(new JobLayout.Nodes(2, 1, new JobLayout.Address("n0", 29500), "flags"));
        var slurm = Map.of("SLURM_PROCID", "1", "SLURM_NTASKS", "2", "SLURM_NNODES", "2", "SLURM_NODEID", "1",
                "SLURM_LOCALID", "0", "SLURM_JOB_NODELIST", "n[5-6]");
        assertThat(JobLayout.resolveNodes(1, 0, null, slurm))
                .isEqualTo(new JobLayout.Nodes(2, 1, new JobLayout.Address("n5", 29500), "slurm"));
        var twoTasksANode = Map.of("SLURM_PROCID", "1", "SLURM_NTASKS", "4", "SLURM_NNODES", "2",
                "SLURM_JOB_NODELIST", "n[5-6]");
        assertThatThrownBy(() -> JobLayout.resolveNodes(1, 0, null, twoTasksANode)).isInstanceOf(UserError.class)
                .hasMessageContaining("srun --ntasks-per-node=1");
        assertThatThrownBy(() -> JobLayout.resolveNodes(2, 0, null, Map.of())).isInstanceOf(UserError.class)
                .hasMessageContaining("--rdzv HOST:PORT");
        assertThatThrownBy(() -> JobLayout.resolveNodes(2, 2, "h:1", Map.of())).isInstanceOf(UserError.class)
                .hasMessageContaining("--node-rank 2 is not below --nnodes 2");
    }

    private static void assertRefused(Map<String, String> env, String message) {
        assertThatThrownBy(() -> resolve(dist(2, 1, 0, null), env)).as(env.toString()).isInstanceOf(UserError.class)
                .hasMessageContaining(message);
    }

    private static Map<String, String> with(Map<String, String> base, String... keyValues) {
        var m = new java.util.HashMap<>(base);
        for (int i = 0; i < keyValues.length; i += 2) {
            m.put(keyValues[i], keyValues[i + 1]);
        }
        return m;
    }
}
