#!/usr/bin/env bash
# One GPU-machine session: the GPU test suite, then fsdp4j's benchmark and the PyTorch FSDP2 peer's in the same
# run, with the same settings. Run there as: bash tools/gpu/session.sh [tests|bench|all|offload|multinode|doctor|export-check] [MODEL...]
# (MODEL: qwen2.5-0.5b, qwen2.5-1.5b, qwen2.5-7b; default qwen2.5-1.5b). Everything goes to $OUT: tests.log,
# bench.jsonl (one line per run, both implementations), and the logs of each run.
# offload [MODEL]: on one GPU, the GPU tests (SKIP_TESTS=1 leaves them out), then fsdp4j's bench of MODEL (default
# qwen2.5-7b-20l: 92 GB of fp32 state, over an 80 GB H100 and under a 128 GiB host; qwen2.5-7b-NNl: the first NN
# blocks, model.layers) without fsdp.cpu_offload, which must fail with one line "error: out of GPU memory ..."
# (NO_OFFLOAD=fits: a model that fits, timed; NO_OFFLOAD=skip), then with it, then PyTorch FSDP2 with CPUOffloadPolicy on the
# same shapes (tools/peers/fsdp2_offload_bench.py: the shared peer has no offload option). OFFLOAD_SETS: more --set options for both runs; WARMUP, STEPS.
# multinode (2, 4 or 8 GPUs): 2 emulated nodes of half the GPUs each (2 x 1, 2 x 2 or 2 x 4; each node its own
# NCCL_HOSTID, NCCL sockets on loopback), full_shard and hybrid_shard, fsdp4j (launch --emulate-nodes 2) beside the
# peer (--gpus-per-node half), into multinode.jsonl;
# then nccl-test on the emulated nodes and on one node of all the GPUs (nccl-test*.jsonl), beside the peer's limits.py.
# doctor: `fsdp4j doctor` (doctor.txt, doctor.json) and the peer's limits.py on every GPU (limits.jsonl), side by side.
# attention (not part of all): attention's rates by shape on one GPU, fsdp4j's kernels beside cuDNN's engine
# (attention.kernel; io.fsdp4j.gpu.AttentionRates, into attention-rates.txt) and PyTorch's backends
# (tools/peers/attention_rates.py, into attention-rates-torch.txt); ATTENTION_SEQ: the sequence lengths;
# ATTENTION_TIMEOUT: seconds for each of the two (default 400 for fsdp4j's, which on a fresh machine first unpacks the
# runtime; 120 for PyTorch's). fsdp4j's 40 lines of 2048-16384 tokens take about 17 s on a warm machine.
# export-check (not part of all): fsdp4j fine-tunes on the GPU and exports (the demo's tiny Llama, and the golden
# Qwen2, Llama and Mistral models; EXPORT_MODELS names others of src/test/resources/golden); transformers loads each
# export on the GPU in fp32 and its logits must equal fsdp4j's within 1e-4 (tools/golden/check_export.py). With
# LOCAL=1 EXPORT_DEVICE=cpu (and PYTHON=a venv with torch and transformers) it runs on this machine's CPU instead. Results: $OUT/export-check.jsonl, logs in $OUT/export-check/.
set -uo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$ROOT"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export OUT=${OUT:-$ROOT/out}
mkdir -p "$OUT"
what=${1:-all}
shift || true
models=("$@")
(( ${#models[@]} )) || models=(qwen2.5-1.5b)
gpus=$(nvidia-smi -L 2>/dev/null | wc -l)
echo "session: $what on $gpus GPU(s); models ${models[*]}"
nvidia-smi --query-gpu=index,name,memory.total --format=csv,noheader

if [[ ( $what == tests || $what == all ) && -n ${TEST_CLASSES:-} ]]; then
    # one JUnit run per class (simple names, e.g. TEST_CLASSES="GpuTrainingTest GpuMultiProcessTest"), each under its
    # own limit; when a class is still running at TEST_CLASS_TIMEOUT seconds, every JVM of the runtime (the tests'
    # and the jobs' children they started) gets SIGQUIT first, so that each prints every thread's stack into the log
    # (where it waits), then SIGKILL 10 s later. All into $OUT/tests.log.
    : > "$OUT/tests.log"
    jvms=${FSDP4J_JRE_DIR:-/tmp/fsdp4j-jre}/jre/bin/java
    for class in $TEST_CLASSES; do
        echo "=== $class" >> "$OUT/tests.log"
        bash tools/gpu/run.sh tests --include-classname ".*\.$class" ${TEST_ARGS:-} >> "$OUT/tests.log" 2>&1 &
        tests_pid=$!
        ( sleep "${TEST_CLASS_TIMEOUT:-150}"; echo "=== $class: still running after ${TEST_CLASS_TIMEOUT:-150} s" \
            >> "$OUT/tests.log"; pkill -QUIT -f "$jvms"; sleep 10; pkill -KILL -f "$jvms" ) &
        guard_pid=$!
        wait "$tests_pid"
        echo "tests $class: exit $?"
        kill "$guard_pid" 2>/dev/null; wait "$guard_pid" 2>/dev/null
    done
    grep -E "^===|tests (successful|failed|skipped|aborted)|MethodSource|✘|^\[node|^\"main\"|^\"rank|at io\.fsdp4j" \
        "$OUT/tests.log" | head -${TEST_SUMMARY_LINES:-80}
elif [[ $what == tests || $what == all || ( $what == offload && -z ${SKIP_TESTS:-} ) ]]; then
    # each test's start and end as it happens (testfeed), so that a run cut off by the limit still says how far it
    # got and which tests were running
    JUNIT_DETAILS=testfeed timeout ${TESTS_TIMEOUT:-300} bash tools/gpu/run.sh tests > "$OUT/tests.log" 2>&1
    status=$?
    echo "tests: exit $status"
    grep -E "tests (successful|failed|skipped|aborted)|:: FAILED" "$OUT/tests.log" | head -40
    echo "tests finished: $(grep -c ':: SUCCESSFUL' "$OUT/tests.log") successful, $(grep -c ':: FAILED' "$OUT/tests.log")" \
        "failed, $(grep -c ':: ABORTED' "$OUT/tests.log") aborted"
    if (( status == 124 )); then # cut off: the tests started and not ended
        grep -oE '^.*:: (STARTED|SUCCESSFUL|FAILED|ABORTED|SKIPPED)' "$OUT/tests.log" | sed -E 's/\x1b\[[0-9;]*m//g' \
            | awk '{ state = $NF; sub(/ :: [A-Z]+$/, ""); if (state == "STARTED") open[$0] = 1; else delete open[$0] }
                   END { for (t in open) print "still running at the limit: " t }'
    fi
fi

if [[ $what == doctor ]]; then
    timeout ${DOCTOR_TIMEOUT:-300} bash tools/gpu/run.sh cli doctor > "$OUT/doctor.txt" 2>&1
    echo "doctor: exit $?"; cat "$OUT/doctor.txt"
    timeout ${DOCTOR_TIMEOUT:-300} bash tools/gpu/run.sh cli doctor --json 2>/dev/null | grep '^{' > "$OUT/doctor.json"
    echo "doctor --json: $(wc -c < "$OUT/doctor.json") bytes"
    timeout ${DOCTOR_TIMEOUT:-300} python3 -m torch.distributed.run --standalone --nproc_per_node="$gpus" \
        .devrt/peers/limits.py > "$OUT/limits.log" 2>&1
    echo "limits.py on $gpus GPU(s): exit $?"; grep '^{' "$OUT/limits.log" | tail -1 | tee "$OUT/limits.jsonl"
fi

if [[ $what == attention ]]; then
    seqs=${ATTENTION_SEQ:-2048 4096 8192 16384}
    # shellcheck disable=SC2086
    timeout ${ATTENTION_TIMEOUT:-400} bash tools/gpu/run.sh test-main io.fsdp4j.gpu.AttentionRates $seqs \
        > "$OUT/attention-rates.txt" 2>&1
    echo "fsdp4j's engines: exit $?"; grep -v WARNING "$OUT/attention-rates.txt"
    # shellcheck disable=SC2086
    timeout ${ATTENTION_TIMEOUT:-120} python3 tools/peers/attention_rates.py --seq $seqs > "$OUT/attention-rates-torch.txt" 2>&1
    echo "PyTorch: exit $?"; grep -v Warning "$OUT/attention-rates-torch.txt" | grep -v "return F\." | tail -40
fi

if [[ $what == bench || $what == all ]]; then
    if [[ -n ${COUNTS:-} ]]; then
        read -r -a counts <<< "$COUNTS"
    else
        counts=(1)
        (( gpus >= 2 )) && counts+=(2)
        (( gpus >= 4 )) && counts+=(4)
    fi
    # LAYERS=N: the first N blocks of each model on both sides (model.layers; the families peer's --layers), for
    # a model whose full fine-tune does not fit one GPU (Qwen3-8B's 131 GB of fp32 state on a 141 GB H200)
    layers_fsdp=(); layers_peer=()
    [[ -n ${LAYERS:-} ]] && { layers_fsdp=(--set model.layers="$LAYERS"); layers_peer=(--layers "$LAYERS"); }
    # SEQ=N: sequences of N tokens on both sides (data.seq_len; the peers' --seq), else the preset's and the peer's
    # default (2048); WARMUP, STEPS: the steps left out and the steps timed (3 and 10); BENCH_SETS: more --set options
    # for fsdp4j's runs, after the ones here (so they win: BENCH_SETS="--set fsdp.param_dtype=fp8")
    [[ -n ${SEQ:-} ]] && { layers_fsdp+=(--set data.seq_len="$SEQ"); layers_peer+=(--seq "$SEQ"); }
    warmup=${WARMUP:-3} steps=${STEPS:-10}
    for model in "${models[@]}"; do
        peer_model=${model#qwen2.5-}
        for n in "${counts[@]}"; do
            log=$OUT/bench-$model-$n${SEQ:+-$SEQ}
            timeout ${BENCH_TIMEOUT:-200} bash tools/gpu/run.sh cli bench --warmup "$warmup" --steps "$steps" \
                --set model.preset="$model" --set dist.device=cuda --set dist.ranks="$n" --set fsdp.param_dtype=bf16 \
                --set fsdp.reduce_dtype=fp32 --set fsdp.activation_checkpointing=full "${layers_fsdp[@]}" \
                ${BENCH_SETS:-} > "$log.fsdp4j.log" 2>&1
            echo "fsdp4j $model x$n: exit $?"; tail -1 "$log.fsdp4j.log" | tee -a "$OUT/bench.jsonl"
            # Qwen2.5: the shared peer; other families (qwen3-8b, gemma-3-12b, phi-3-mini, ...): the same method with
            # transformers' class of the preset (tools/peers/families_fsdp2_bench.py)
            peer=(.devrt/peers/pytorch_fsdp2_bench.py --model "$peer_model" ${SEQ:+--seq "$SEQ"})
            [[ $model == qwen2.5-* ]] || peer=(tools/peers/families_fsdp2_bench.py --model "$model" "${layers_peer[@]}")
            for compiled in 0 ${PEER_COMPILE:+1}; do # PEER_COMPILE=1: the compiled peer too, after the eager one
                timeout ${BENCH_TIMEOUT:-200} python3 -m torch.distributed.run --standalone --nproc_per_node="$n" \
                    "${peer[@]}" --warmup "$warmup" --steps "$steps" --ac 1 --compile $compiled > "$log.peer$compiled.log" 2>&1
                echo "peer $model x$n compile $compiled: exit $?"
                grep '^{' "$log.peer$compiled.log" | tail -1 | tee -a "$OUT/bench.jsonl"
            done
        done
    done
fi

if [[ $what == export-check ]]; then
    py=${PYTHON:-python3}
    dir=$OUT/export-check
    rm -rf "$dir" "$OUT/export-check.jsonl"
    mkdir -p "$dir"
    # EXPORT_DEVICE=cpu LOCAL=1: the same check on this machine's CPU ranks with bin/fsdp4j (transformers on CPU)
    if [[ -n ${LOCAL:-} ]]; then
        fsdp4j() { timeout ${EXPORT_TIMEOUT:-300} bin/fsdp4j "$@"; }
    else
        fsdp4j() { timeout ${EXPORT_TIMEOUT:-300} bash tools/gpu/run.sh cli "$@"; }
    fi
    device=${EXPORT_DEVICE:-cuda}
    # random ids below the vocabulary of an export's config.json: ROWS sequences of LEN tokens, one JSON line each
    ids() { "$py" -c 'import json,random,sys
v=json.load(open(sys.argv[1]))["vocab_size"]; r=random.Random(int(sys.argv[4]))
for _ in range(int(sys.argv[2])): print(json.dumps({"input_ids": [r.randrange(v) for _ in range(int(sys.argv[3]))]}))' "$@"; }
    # the built-in demo on one GPU: the tiny preset fine-tuned on the shipped instructions, exported by the run
    fsdp4j train --set dist.device="$device" --set dist.ranks=1 --set train.steps=60 \
        --set checkpoint.dir="$dir/tiny/checkpoints" --set log.metrics="$dir/tiny/metrics.jsonl" > "$dir/tiny.log" 2>&1
    echo "train tiny (demo): exit $?"; grep -E "^fsdp4j: (held-out|checkpoint)" "$dir/tiny.log"
    # the golden models (Qwen2: biases, tied embeddings; Llama: untied; Mistral: sliding window), a few steps each
    read -r -a golden <<< "${EXPORT_MODELS:-qwen2 llama mistral}"
    for m in "${golden[@]}"; do
        ids src/test/resources/golden/$m/config.json 48 16 7 > "$dir/$m-train.jsonl"
        fsdp4j train --set model.path=src/test/resources/golden/$m --set data.train="$dir/$m-train.jsonl" \
            --set data.seq_len=16 --set train.batch_size=4 --set train.steps=10 --set optim.lr=0.01 \
            --set dist.device="$device" --set dist.ranks=1 --set checkpoint.dir="$dir/$m/checkpoints" > "$dir/$m.log" 2>&1
        echo "train $m: exit $?"
        fsdp4j export --checkpoint "$dir/$m/checkpoints" --out "$dir/$m/export" >> "$dir/$m.log" 2>&1
        echo "export $m: exit $?"
    done
    for m in tiny "${golden[@]}"; do
        ids "$dir/$m/export/config.json" 4 32 11 > "$dir/$m/ids.jsonl"
        fsdp4j score --model "$dir/$m/export" --data "$dir/$m/ids.jsonl" \
            --logits-out "$dir/$m/fsdp4j_logits.safetensors" > "$dir/$m-score.log" 2>&1
        echo "score $m: exit $?"
        "$py" tools/golden/check_export.py "$dir/$m/export" "$dir/$m/ids.jsonl" "$dir/$m/fsdp4j_logits.safetensors" \
            2> "$dir/$m-check.err" | tee -a "$OUT/export-check.jsonl"
        echo "check $m: exit ${PIPESTATUS[0]}"
    done
fi

if [[ $what == offload ]]; then
    model=${1:-qwen2.5-7b-20l}
    # qwen2.5-7b-NNl: Qwen2.5-7B's first NN blocks (model.layers), the shapes the peer's offload script takes
    preset=$model; layers_set=()
    if [[ $model =~ ^qwen2\.5-7b-([0-9]+)l$ ]]; then
        preset=qwen2.5-7b; layers_set=(--set model.layers="${BASH_REMATCH[1]}")
    fi
    # the state lives off the Java heap (page-locked and native memory): keep the heap small beside it
    export FSDP4J_JAVA_OPTS="${FSDP4J_JAVA_OPTS:-} -Xmx16g"
    common=(--warmup "${WARMUP:-2}" --steps "${STEPS:-5}" --set model.preset="$preset" "${layers_set[@]}" --set dist.device=cuda
            --set dist.ranks=1 --set fsdp.param_dtype=bf16 --set fsdp.reduce_dtype=fp32
            --set fsdp.activation_checkpointing=full)
    read -r -a more <<< "${OFFLOAD_SETS:-}" # e.g. OFFLOAD_SETS="--set fsdp.strategy=shard_grad_op"
    common+=("${more[@]}")
    log=$OUT/offload-$model
    # without offload: expected to run out of memory in one line (NO_OFFLOAD=fits: a model that fits, timed for
    # comparison; NO_OFFLOAD=skip: not run)
    case ${NO_OFFLOAD:-oom} in
    skip) ;;
    *)
    timeout ${BENCH_TIMEOUT:-240} bash tools/gpu/run.sh cli bench "${common[@]}" > "$log.device.log" 2> "$log.device.err"
    status=$?
    errors=$(grep -v '^WARNING: Using incubator modules' "$log.device.err")
    echo "fsdp4j $model without offload: exit $status; stderr: $(wc -l <<< "$errors") line(s):"
    echo "$errors" | head -3
    if [[ ${NO_OFFLOAD:-oom} == fits ]]; then
        grep '^{' "$log.device.log" | tail -1 | tee -a "$OUT/bench.jsonl"
    elif (( status == 2 )) && [[ $(wc -l <<< "$errors") == 1 && $errors == "error: out of GPU memory"* ]]; then
        echo "offload: out of memory without offload, reported in one line: ok"
    else
        echo "offload: UNEXPECTED outcome without offload (see $log.device.log and $log.device.err)"
        tail -1 "$log.device.log" | grep '^{' >> "$OUT/bench.jsonl"
    fi
    ;;
    esac
    timeout ${BENCH_TIMEOUT:-240} bash tools/gpu/run.sh cli bench "${common[@]}" --set fsdp.cpu_offload=true \
        > "$log.offload.log" 2> "$log.offload.err"
    echo "fsdp4j $model with offload: exit $?"; grep '^{' "$log.offload.log" | tail -1 | tee -a "$OUT/bench.jsonl"
    grep -v '^WARNING: Using incubator modules' "$log.offload.err" | tail -3
    free -g | head -2
    # the PyTorch figure: FSDP2 with CPUOffloadPolicy on the same shapes (tools/peers/fsdp2_offload_bench.py; the
    # shared peer has no offload option)
    if [[ $model == qwen2.5-7b-*l ]]; then
        layers=${model#qwen2.5-7b-}; layers=${layers%l}
        timeout ${PEER_TIMEOUT:-300} python3 -m torch.distributed.run --standalone --nproc_per_node=1 \
            tools/peers/fsdp2_offload_bench.py --layers "$layers" --warmup "${WARMUP:-2}" --steps "${STEPS:-5}" \
            > "$log.peer.log" 2>&1
        echo "peer (FSDP2 CPUOffloadPolicy) $model: exit $?"; grep '^{' "$log.peer.log" | tail -1 | tee -a "$OUT/bench.jsonl"
        grep -iE 'error|Traceback' "$log.peer.log" | tail -3
    else
        echo "peer: tools/peers/fsdp2_offload_bench.py takes the 7B shapes with fewer layers (qwen2.5-7b-NNl) only"
    fi
fi

if [[ $what == multinode ]]; then
    (( gpus >= 2 )) || { echo "multinode: needs 2 GPUs or more, $gpus visible"; exit 1; }
    per_node=$(( gpus / 2 )) # 2 emulated nodes of half the machine each: 2 x 1 on 2 GPUs, 2 x 2 on 4, 2 x 4 on 8
    export NCCL_SOCKET_IFNAME=lo
    # LAYERS=N: the first N blocks of each model on both sides (model.layers; the families peer's --layers), for
    # a model whose full fine-tune does not fit one GPU (Qwen3-8B's 131 GB of fp32 state on a 141 GB H200)
    layers_fsdp=(); layers_peer=()
    [[ -n ${LAYERS:-} ]] && { layers_fsdp=(--set model.layers="$LAYERS"); layers_peer=(--layers "$LAYERS"); }
    # SEQ=N: sequences of N tokens on both sides (data.seq_len; the peers' --seq), else the preset's and the peer's
    # default (2048); WARMUP, STEPS: the steps left out and the steps timed (3 and 10); BENCH_SETS: more --set options
    # for fsdp4j's runs, after the ones here (so they win: BENCH_SETS="--set fsdp.param_dtype=fp8")
    [[ -n ${SEQ:-} ]] && { layers_fsdp+=(--set data.seq_len="$SEQ"); layers_peer+=(--seq "$SEQ"); }
    warmup=${WARMUP:-3} steps=${STEPS:-10}
    for model in "${models[@]}"; do
        peer_model=${model#qwen2.5-}
        for strategy in full_shard hybrid_shard; do
            log=$OUT/multinode-$model-$strategy
            timeout ${BENCH_TIMEOUT:-400} bash tools/gpu/run.sh cli launch --emulate-nodes 2 -- bench --warmup 3 \
                --steps 10 --set model.preset="$model" --set dist.device=cuda --set dist.ranks="$per_node" \
                --set fsdp.strategy="$strategy" --set fsdp.param_dtype=bf16 --set fsdp.reduce_dtype=fp32 \
                --set fsdp.activation_checkpointing=full > "$log.fsdp4j.log" 2>&1
            echo "fsdp4j $model 2 nodes x $per_node $strategy: exit $?"
            grep -o '{"impl".*' "$log.fsdp4j.log" | tail -1 | tee -a "$OUT/multinode.jsonl"
            timeout ${BENCH_TIMEOUT:-400} python3 -m torch.distributed.run --standalone --nproc_per_node="$gpus" \
                .devrt/peers/pytorch_fsdp2_bench.py --model "$peer_model" --strategy "${strategy%_shard}" \
                --gpus-per-node "$per_node" --warmup 3 --steps 10 --ac 1 > "$log.peer.log" 2>&1
            echo "peer $model 2 nodes x $per_node $strategy: exit $?"; grep '^{' "$log.peer.log" | tail -1 | tee -a "$OUT/multinode.jsonl"
        done
    done
    timeout ${BENCH_TIMEOUT:-400} bash tools/gpu/run.sh cli launch --emulate-nodes 2 -- nccl-test --set dist.device=cuda \
        --set dist.ranks="$per_node" --set fsdp.strategy=hybrid_shard --min-bytes 1M --max-bytes 512M --factor 2 --json \
        > "$OUT/nccl-test-emulated.log" 2>&1
    echo "nccl-test 2 emulated nodes x $per_node: exit $?"
    grep -o '{"group".*' "$OUT/nccl-test-emulated.log" | tee "$OUT/nccl-test-emulated.jsonl" | grep '"bytes":536870912'
    timeout ${BENCH_TIMEOUT:-400} bash tools/gpu/run.sh cli nccl-test --set dist.device=cuda --set dist.ranks="$gpus" \
        --min-bytes 1M --max-bytes 512M --factor 2 --json > "$OUT/nccl-test-node.log" 2>&1
    echo "nccl-test one node x $gpus: exit $?"
    grep -o '{"group".*' "$OUT/nccl-test-node.log" | tee "$OUT/nccl-test-node.jsonl" | grep '"bytes":536870912'
    timeout ${BENCH_TIMEOUT:-200} python3 -m torch.distributed.run --standalone --nproc_per_node="$gpus" \
        .devrt/peers/limits.py > "$OUT/limits.log" 2>&1
    echo "peer limits.py x$gpus: exit $?"; grep '^{' "$OUT/limits.log" | tail -1 | tee "$OUT/limits.jsonl"
fi
