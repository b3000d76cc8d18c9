#!/usr/bin/env bash
# The bench runs whose peak reserved memory the plan's memory model is tested against (src/test/java/io/fsdp4j/plan/
# MemoryModelTest.java, docs/plan.md), on one GPU: several ranks share it (dist.share_gpu), so rank 0's peak is what
# one GPU of an N-GPU job holds. Run on the GPU machine after tools/gpu/pack.sh: bash tools/gpu/memory_runs.sh [NAME...]
# (default: all, in the order below). Each run's JSON line goes to stdout and to $OUT/memory_runs.jsonl, prefixed by
# its name; a run that fails prints its name and exit status and the next one starts.
set -uo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$ROOT"
OUT=${OUT:-$ROOT/out}
mkdir -p "$OUT"
common=(--warmup 1 --steps 2 --set dist.device=cuda --set fsdp.param_dtype=bf16 --set fsdp.reduce_dtype=fp32
        --set fsdp.activation_checkpointing=full --set data.seq_len=2048)
declare -A runs=(
  [7b-p1]="model.preset=qwen2.5-7b dist.ranks=1 fsdp.prefetch=1"
  [1.5b-x2-p0]="model.preset=qwen2.5-1.5b dist.ranks=2 dist.share_gpu=true fsdp.prefetch=0"
  [1.5b-x2-p1]="model.preset=qwen2.5-1.5b dist.ranks=2 dist.share_gpu=true fsdp.prefetch=1"
  [1.5b-x2-p2]="model.preset=qwen2.5-1.5b dist.ranks=2 dist.share_gpu=true fsdp.prefetch=2"
  [0.5b-x4]="model.preset=qwen2.5-0.5b dist.ranks=4 dist.share_gpu=true"
  [1.5b-x4]="model.preset=qwen2.5-1.5b dist.ranks=4 dist.share_gpu=true"
  [1.5b-x4-sgo]="model.preset=qwen2.5-1.5b dist.ranks=4 dist.share_gpu=true fsdp.strategy=shard_grad_op"
  [1.5b-x1]="model.preset=qwen2.5-1.5b dist.ranks=1"
  [1.5b-x1-sgo]="model.preset=qwen2.5-1.5b dist.ranks=1 fsdp.strategy=shard_grad_op"
  [1.5b-2x2-hybrid]="model.preset=qwen2.5-1.5b dist.ranks=4 dist.share_gpu=true fsdp.strategy=hybrid_shard fsdp.shard_size=2"
  [7b-p0]="model.preset=qwen2.5-7b dist.ranks=1 fsdp.prefetch=0"
  [7b-p2]="model.preset=qwen2.5-7b dist.ranks=1 fsdp.prefetch=2"
  [7b-x2]="model.preset=qwen2.5-7b dist.ranks=2 dist.share_gpu=true"
  [7b-20l-offload]="model.preset=qwen2.5-7b-20l dist.ranks=1 fsdp.cpu_offload=true"
  [0.5b-x1]="model.preset=qwen2.5-0.5b dist.ranks=1"
  [7b-selective]="model.preset=qwen2.5-7b dist.ranks=1 fsdp.activation_checkpointing=selective"
  [7b-none]="model.preset=qwen2.5-7b dist.ranks=1 fsdp.activation_checkpointing=none"
  [1.5b-batch2]="model.preset=qwen2.5-1.5b dist.ranks=1 train.batch_size=2"
  [1.5b-seq4096]="model.preset=qwen2.5-1.5b dist.ranks=1 data.seq_len=4096"
)
order=(7b-p1 1.5b-x2-p0 1.5b-x2-p1 1.5b-x2-p2 0.5b-x4 1.5b-x4 1.5b-x4-sgo 1.5b-x1 1.5b-x1-sgo 1.5b-2x2-hybrid 7b-p0
       7b-p2 7b-x2 7b-20l-offload 0.5b-x1 7b-selective 7b-none 1.5b-batch2 1.5b-seq4096)
(( $# )) && order=("$@")
for name in "${order[@]}"; do
    [[ -n ${runs[$name]:-} ]] || { echo "error: no run named '$name'; the runs: ${!runs[*]}" >&2; exit 2; }
    sets=()
    for kv in ${runs[$name]}; do sets+=(--set "$kv"); done
    start=$SECONDS
    line=$(bash tools/gpu/run.sh cli bench "${common[@]}" "${sets[@]}" 2>"$OUT/memory_runs.$name.err" | grep '^{' | tail -1)
    status=$?
    if [[ -n $line ]]; then
        echo "$name $line" | tee -a "$OUT/memory_runs.jsonl"
    else
        echo "$name failed (status $status, $((SECONDS - start)) s): $(tail -2 "$OUT/memory_runs.$name.err")" | tee -a "$OUT/memory_runs.jsonl"
    fi
    rm -f "$OUT/memory_runs.$name.err"
done
