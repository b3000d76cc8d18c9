#!/usr/bin/env bash
# Evaluation on one GPU, the three measurements issue #30 asks for. Run there as:
#   bash tools/gpu/eval_runs.sh [during|model|checkpoint|squad|all] (default all); SQUAD=FILE for squad (a SQuAD v1.1 JSON file)
# during: Qwen2.5-7B (random weights) trains 16 steps at seq 2048 with the held-out loss of 8 sequences every 4 steps
#         (log.eval_every); the metrics file gives each evaluation's wall time (eval_seconds) beside the step times,
#         and the JVM's resident memory is sampled every 2 s (rss.txt) to show whether evaluation grows the host side.
# model:  a Qwen2.5-7B Hugging Face directory (random weights, bf16, written by transformers on the GPU) evaluated by
#         `fsdp4j eval --task loss` on the GPU, timed, and by transformers on the same sequences (both losses printed).
# checkpoint: Qwen2.5-7B (random weights) trains 2 steps on CKPT_RANKS GPUs (default 2) and saves its checkpoint
#         (fp32 master weights and AdamW state: about 91 GB, more than a one-GPU machine's 64 GB disk: run it on a
#         two-GPU kind); then `fsdp4j eval --checkpoint` on ONE GPU gives the held-out loss, timed, beside the loss the
#         training run evaluated after its last step (the same weights).
# squad:  BLOOM-560M (the preset, random weights) trains 4 steps on SQUAD and saves a checkpoint; then
#         `fsdp4j eval --checkpoint --task squad` answers every question of SQUAD on the GPU, timed, SQUAD_BATCH
#         questions a forward (default 128; its progress every 10 s in squad-eval.log).
# Everything goes to $OUT/eval-runs/ (logs, metrics, eval-runs.jsonl: one line per measurement).
set -uo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$ROOT"
export OUT=${OUT:-$ROOT/out}
dir=$OUT/eval-runs
work=${WORK:-/tmp/eval-runs}
mkdir -p "$dir" "$work"
what=${1:-all}
py=${PYTHON:-python3}
# fsdp4j SECONDS ARGS...: the command line under a time limit (LOCAL=1: this machine's bin/fsdp4j)
fsdp4j() {
    local limit=$1; shift
    if [[ -n ${LOCAL:-} ]]; then timeout "$limit" bin/fsdp4j "$@"; else timeout "$limit" bash tools/gpu/run.sh cli "$@"; fi
}
# DEVICE=cpu, DURING_MODEL=tiny VOCAB=256 SQUAD_MODEL=tiny: the same steps on CPU ranks, to check this script
gpu=(--set dist.device=${DEVICE:-cuda} --set dist.ranks=1 --set fsdp.param_dtype=${PARAM_DTYPE:-bf16})
during_model=${DURING_MODEL:-qwen2.5-7b}
vocab=${VOCAB:-152064}
seq=${SEQ:-2048}
now() { date +%s.%N; }
since() { "$py" -c 'import sys,time; print(round(time.time() - float(sys.argv[1]), 1))' "$1"; }

# random token ids: COUNT sequences of LEN ids below VOCAB, one {"input_ids": [...]} a line
ids() {
    "$py" -c 'import json,random,sys
r=random.Random(int(sys.argv[4]))
for _ in range(int(sys.argv[1])): print(json.dumps({"input_ids": [r.randrange(int(sys.argv[3])) for _ in range(int(sys.argv[2]))]}))' "$@"
}

# the resident memory (KiB) of the newest fsdp4j JVM every 2 s, into $1, until that JVM ends
watch_rss() {
    local pid=""
    for _ in $(seq 60); do
        pid=$(pgrep -n -f 'fsdp4j.jar' || true)
        [[ -n $pid ]] && break
        sleep 0.5
    done
    [[ -n $pid ]] || return 0
    while kill -0 "$pid" 2>/dev/null; do
        echo "$(date +%s) $(ps -o rss= -p "$pid" 2>/dev/null)" >> "$1"
        sleep 2
    done
}

if [[ $what == during || $what == all ]]; then
    ids 32 "$seq" "$vocab" 1 > "$work/train.jsonl"
    ids 8 "$seq" "$vocab" 2 > "$work/eval.jsonl"
    : > "$dir/rss.txt"
    watch_rss "$dir/rss.txt" &
    watcher=$!
    t0=$(now)
    fsdp4j ${DURING_TIMEOUT:-400} train --set model.preset="$during_model" "${gpu[@]}" --set fsdp.reduce_dtype=fp32 \
        --set fsdp.activation_checkpointing=full --set data.train="$work/train.jsonl" --set data.eval="$work/eval.jsonl" \
        --set data.seq_len="$seq" --set train.batch_size=1 --set train.steps=16 --set log.eval_every=4 \
        --set run.dir="$dir/during" --set checkpoint.dir='' --set log.metrics="$dir/during-metrics.jsonl" > "$dir/during.log" 2>&1
    rc=$?
    wait "$watcher"
    echo "during: exit $rc ($(since "$t0") s)"
    grep -E "^fsdp4j: eval|^step" "$dir/during.log" | tail -8
    "$py" - "$dir/during-metrics.jsonl" "$dir/rss.txt" "$during_model" "$seq" <<'EOF' | tee -a "$dir/eval-runs.jsonl"
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
steps = [l for l in lines if "step_s" in l and l["step"] > 2]
evals = [l for l in lines if "eval_seconds" in l]
rss = [int(l.split()[1]) for l in open(sys.argv[2]) if len(l.split()) == 2]
step_s = sum(l["step_s"] for l in steps) / len(steps)
print(json.dumps(dict(measure="eval during training", model=sys.argv[3], seq=int(sys.argv[4]), eval_sequences=8,
                      step_s=step_s, eval_seconds=[l["eval_seconds"] for l in evals],
                      eval_at=[l["step"] for l in evals], eval_loss=[l["eval_loss"] for l in evals],
                      rss_gib_first=rss[0] / 2**20 if rss else None, rss_gib_max=max(rss) / 2**20 if rss else None,
                      rss_gib_last=rss[-1] / 2**20 if rss else None, rss_samples=len(rss))))
EOF
fi

if [[ $what == model || $what == all ]]; then
    [[ -f $work/eval.jsonl ]] || ids 8 "$seq" "$vocab" 2 > "$work/eval.jsonl"
    if [[ ! -f $work/qwen2.5-7b/config.json ]]; then
        "$py" - "$work/qwen2.5-7b" <<'EOF' > "$dir/model-write.log" 2>&1
import sys, torch, transformers
cfg = transformers.Qwen2Config(hidden_size=3584, intermediate_size=18944, num_hidden_layers=28,
                               num_attention_heads=28, num_key_value_heads=4, vocab_size=152064, rope_theta=1e6,
                               max_position_embeddings=32768, tie_word_embeddings=False, torch_dtype="bfloat16")
torch.manual_seed(0)
with torch.device("cuda"):
    model = transformers.Qwen2ForCausalLM(cfg).to(torch.bfloat16)
model.save_pretrained(sys.argv[1], safe_serialization=True)
EOF
        echo "model written: exit $?"
    fi
    t0=$(now)
    fsdp4j ${MODEL_TIMEOUT:-300} eval --model "$work/qwen2.5-7b" --data "$work/eval.jsonl" --task loss "${gpu[@]}" \
        > "$dir/model-eval.log" 2>&1
    rc=$?
    took=$(since "$t0")
    echo "fsdp4j eval 7B: exit $rc ($took s)"; tail -3 "$dir/model-eval.log"
    t0=$(now)
    "$py" - "$work/qwen2.5-7b" "$work/eval.jsonl" <<'EOF' > "$dir/model-hf.log" 2>&1
import json, sys, torch, transformers
model = transformers.AutoModelForCausalLM.from_pretrained(sys.argv[1], torch_dtype=torch.bfloat16).cuda().eval()
total, tokens = 0.0, 0
with torch.no_grad():
    for line in open(sys.argv[2]):
        ids = torch.tensor([json.loads(line)["input_ids"]], device="cuda")
        logits = model(input_ids=ids).logits.float()
        total += torch.nn.functional.cross_entropy(logits[0, :-1], ids[0, 1:], reduction="sum").item()
        tokens += ids.shape[1] - 1
print(json.dumps({"loss": total / tokens, "tokens": tokens}))
EOF
    echo "transformers eval 7B: exit $? ($(since "$t0") s)"; tail -1 "$dir/model-hf.log"
    "$py" -c 'import json,sys
f=[json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
h=[json.loads(l) for l in open(sys.argv[2]) if l.startswith("{")]
print(json.dumps(dict(measure="eval --model 7B on the GPU", model="qwen2.5-7b", seq=2048, sequences=8,
    fsdp4j=f[-1] if f else None, transformers=h[-1] if h else None, fsdp4j_wall_s=float(sys.argv[3]))))' \
        "$dir/model-eval.log" "$dir/model-hf.log" "$took" | tee -a "$dir/eval-runs.jsonl"
fi

if [[ $what == checkpoint ]]; then
    [[ -f $work/train.jsonl ]] || ids 32 "$seq" "$vocab" 1 > "$work/train.jsonl"
    [[ -f $work/eval.jsonl ]] || ids 8 "$seq" "$vocab" 2 > "$work/eval.jsonl"
    rm -rf "$work/ckpt7b"
    t0=$(now)
    fsdp4j ${CKPT_TIMEOUT:-420} train --set model.preset="$during_model" --set dist.device=${DEVICE:-cuda} \
        --set dist.ranks=${CKPT_RANKS:-2} --set fsdp.param_dtype=${PARAM_DTYPE:-bf16} --set fsdp.reduce_dtype=fp32 \
        --set fsdp.activation_checkpointing=full --set data.train="$work/train.jsonl" --set data.eval="$work/eval.jsonl" \
        --set data.seq_len="$seq" --set train.batch_size=1 --set train.steps=2 --set log.eval_every=2 \
        --set run.dir="$work/ckpt7b" --set log.metrics="$dir/ckpt-train-metrics.jsonl" > "$dir/ckpt-train.log" 2>&1
    echo "train and save: exit $? ($(since "$t0") s); checkpoint $(du -sh "$work/ckpt7b" | cut -f1)"
    grep -E "^fsdp4j: (checkpoint|eval)" "$dir/ckpt-train.log" | tail -3
    t0=$(now)
    fsdp4j ${MODEL_TIMEOUT:-300} eval --checkpoint "$work/ckpt7b/checkpoints" --data "$work/eval.jsonl" --task loss \
        "${gpu[@]}" > "$dir/ckpt-eval.log" 2>&1
    rc=$?
    took=$(since "$t0")
    echo "eval --checkpoint 7B on one GPU: exit $rc ($took s)"; tail -3 "$dir/ckpt-eval.log"
    "$py" -c 'import json,sys
f=[json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
m=[json.loads(l) for l in open(sys.argv[2]) if l.strip()]
e=[l["eval_loss"] for l in m if "eval_loss" in l]
print(json.dumps(dict(measure="eval --checkpoint on one GPU", model=sys.argv[4], seq=int(sys.argv[5]), sequences=8,
    eval=f[-1] if f else None, training_eval_loss=e[-1] if e else None, wall_s=float(sys.argv[3]))))' \
        "$dir/ckpt-eval.log" "$dir/ckpt-train-metrics.jsonl" "$took" "$during_model" "$seq" | tee -a "$dir/eval-runs.jsonl"
    rm -rf "$work/ckpt7b"
fi

if [[ $what == squad || $what == all ]]; then
    squad=${SQUAD:?SQUAD=FILE: a SQuAD v1.1 JSON file}
    rm -rf "$work/bloom" "$work/squad-tokens"
    # a preset has no tokenizer: its training data tokenized as UTF-8 bytes, as the eval below reads the questions
    fsdp4j 120 prepare --input "$squad" --format squad --tokenizer bytes --out "$work/squad-tokens" > "$dir/squad-prepare.log" 2>&1
    echo "prepare squad: exit $?"
    fsdp4j ${SQUAD_TIMEOUT:-300} train --set model.preset="${SQUAD_MODEL:-bloom-560m}" "${gpu[@]}" --set data.train="$work/squad-tokens" \
        --set data.seq_len=1024 --set train.batch_size=4 --set train.steps=4 --set run.dir="$work/bloom" \
        > "$dir/squad-train.log" 2>&1
    echo "train bloom-560m: exit $?"; grep -E "^fsdp4j: checkpoint" "$dir/squad-train.log"
    t0=$(now)
    fsdp4j ${SQUAD_TIMEOUT:-600} eval --checkpoint "$work/bloom/checkpoints" --task squad --data "$squad" --tokenizer bytes \
        --batch-size ${SQUAD_BATCH:-128} "${gpu[@]}" > "$dir/squad-eval.log" 2>&1
    rc=$?
    took=$(since "$t0")
    echo "eval squad: exit $rc ($took s)"; grep "answered" "$dir/squad-eval.log" | tail -3; tail -2 "$dir/squad-eval.log"
    "$py" -c 'import json,sys
r=[json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
print(json.dumps(dict(measure="eval --checkpoint --task squad", model=sys.argv[3], result=r[-1] if r else None,
    wall_s=float(sys.argv[2]))))' "$dir/squad-eval.log" "$took" "${SQUAD_MODEL:-bloom-560m}" | tee -a "$dir/eval-runs.jsonl"
fi
