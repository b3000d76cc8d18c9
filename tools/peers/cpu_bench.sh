#!/usr/bin/env bash
# fsdp4j's CPU backend beside PyTorch on CPU, interleaved: for each repetition and shape, the peer
# (tools/peers/cpu_llama_bench.py, all cores), then `fsdp4j bench --set dist.device=cpu` with 1 rank and with 2 ranks
# (the same sequences a step, split across the ranks). Prints the load average before each run and one JSON line
# per run, each with the process's user+system CPU seconds added ("cpu_s"), so that a loaded machine's figures can
# still be compared.
# Usage: tools/peers/cpu_bench.sh PYTHON [REPS] [SHAPES]   SHAPES: tiny, 40m or "tiny 40m" (default)
# WARMUP=N STEPS=N (environment) replace every shape's untimed and timed step counts. Each round also runs the peer
# through torch.compile (its "compiled": true line; at least 3 untimed steps, the first ones compile), as the GPU
# peers' --compile 1 does; PEER_COMPILE=0 leaves it out.
#
# The tiny shape's window is 100 untimed then 50 timed steps (it was 2 then 5 before 2026-11-26): its steps take
# 0.06 to 0.1 s, and the JVM spends its first 5 to 15 s compiling (about 500 methods through C2, on the same two
# cores; until then the Vector API's operations run as slow Java loops), so 2 warm-up steps timed fsdp4j's
# compilation more than its steps, and 20 still part of it. Both sides run the same window; WARMUP=2 STEPS=5 gives
# the old one (the start-up's cost, which a user of the demo pays once).
set -euo pipefail
PY=${1:?usage: tools/peers/cpu_bench.sh PYTHON [REPS] [SHAPES]}
REPS=${2:-3}
SHAPES=${3:-tiny 40m}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)

# name: peer model, fsdp4j model key, seq, sequences a step, warmup, timed steps
declare -A SHAPE=([tiny]="tiny model.preset=tiny 64 16 100 50" [40m]="$ROOT/tools/peers/llama-40m model.path=$ROOT/tools/peers/llama-40m 256 4 1 3")

timed() { # runs "$@", appends "cpu_s" to its JSON line
    local t
    t=$(mktemp)
    /usr/bin/time -f '%U %S' -o "$t" "$@" 2>/dev/null | grep '^{' | tail -1 \
        | python3 -c 'import json,sys; l=json.loads(sys.stdin.read()); u,s=open(sys.argv[1]).read().split()[-2:]; l["cpu_s"]=float(u)+float(s); print(json.dumps(l))' "$t"
    rm -f "$t"
}

for rep in $(seq "$REPS"); do
    for shape in $SHAPES; do
        read -r model key seq batch warmup steps <<<"${SHAPE[$shape]}"
        warmup=${WARMUP:-$warmup}
        steps=${STEPS:-$steps}
        echo "# rep $rep $shape: $(uptime)"
        timed "$PY" "$ROOT/tools/peers/cpu_llama_bench.py" --model "$model" --seq "$seq" --batch "$batch" \
            --warmup "$warmup" --steps "$steps"
        if [[ ${PEER_COMPILE:-1} == 1 ]]; then # PyTorch's strongest form too: the model through torch.compile
            echo "# rep $rep $shape compiled: $(uptime)"
            timed "$PY" "$ROOT/tools/peers/cpu_llama_bench.py" --model "$model" --seq "$seq" --batch "$batch" \
                --warmup "$((warmup > 3 ? warmup : 3))" --steps "$steps" --compile 1
        fi
        for ranks in 1 2; do
            echo "# rep $rep $shape ranks $ranks: $(uptime)"
            timed "$ROOT/bin/fsdp4j" bench --warmup "$warmup" --steps "$steps" --set dist.device=cpu \
                --set "$key" --set dist.ranks="$ranks" --set train.batch_size=$((batch / ranks)) \
                --set data.seq_len="$seq"
        done
    done
done
