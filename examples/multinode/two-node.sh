#!/usr/bin/env bash
# A job of two nodes started by hand: run this script on each node, with the same MASTER_ADDR and
# FSDP4J_JOB_TOKEN, NODE_RANK=0 on the first node (it serves the rendezvous) and NODE_RANK=1 on the second.
#
#   node0$ export FSDP4J_JOB_TOKEN=<the same secret on both>   # e.g. $(openssl rand -hex 16), shared once
#   node0$ NODE_RANK=0 MASTER_ADDR=node0 examples/multinode/two-node.sh
#   node1$ NODE_RANK=1 MASTER_ADDR=node0 examples/multinode/two-node.sh
#
# Arguments after the script name replace the default train arguments (the built-in demo, 2 CPU ranks a node).
# FSDP4J_JAR=/path/to/fsdp4j.jar runs that jar instead of this checkout's bin/fsdp4j; FSDP4J="a command line" runs
# that (e.g. FSDP4J=fsdp4j when installed). MASTER_PORT: default 29500.
# On one machine, for a try: MASTER_ADDR=127.0.0.1 and NODE_RANK=0 / 1 in two terminals.
set -euo pipefail

: "${NODE_RANK:?set NODE_RANK to 0 on the first node and 1 on the second}"
: "${MASTER_ADDR:?set MASTER_ADDR to the host name or IP address of node 0}"
: "${FSDP4J_JOB_TOKEN:?set FSDP4J_JOB_TOKEN to the same secret on both nodes, e.g. export FSDP4J_JOB_TOKEN=\$(openssl rand -hex 16)}"
export FSDP4J_JOB_TOKEN
MASTER_PORT=${MASTER_PORT:-29500}

if [[ -n ${FSDP4J:-} ]]; then
    read -r -a fsdp4j <<< "$FSDP4J"
elif [[ -n ${FSDP4J_JAR:-} ]]; then
    fsdp4j=(java -XX:+UseParallelGC --enable-native-access=ALL-UNNAMED -jar "$FSDP4J_JAR")
else
    fsdp4j=("$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)/bin/fsdp4j")
fi

if [[ $# -eq 0 ]]; then
    set -- --set dist.device=cpu --set dist.ranks=2 --set train.steps=20 --set fsdp.strategy=hybrid_shard
fi

exec "${fsdp4j[@]}" launch --nnodes 2 --node-rank "$NODE_RANK" --rdzv "$MASTER_ADDR:$MASTER_PORT" -- train "$@"
