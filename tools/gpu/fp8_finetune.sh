#!/bin/bash
# fp8's fine-tune beside bf16's (issue 26, (a)): FT_MODEL (default qwen2.5-0.5b, random weights: the device has no
# Hub access) trained FT_STEPS steps (default 500) on the demo's instructions (FT_DATA, Alpaca: tokenized into bytes by
# `fsdp4j prepare --tokenizer bytes`, the answers carrying the loss, packed into FT_SEQ-token sequences, default 512;
# FT_BATCH sequences a step, default 8), full activation checkpointing, once in bf16 and once
# in fp8, the same seed and so the same batches, both at once on the one GPU (CONCURRENT=0: one after the other). Each
# run under FT_TIMEOUT seconds (default 150). Writes $OUT/ft-bf16.jsonl and $OUT/ft-fp8.jsonl (the metrics, a line a
# step), their output into $OUT/ft.log, then the comparison (tools/gpu/fp8_compare.sh) there and on stdout.
# FSDP4J_CLI: the command that runs fsdp4j (default: bash tools/gpu/run.sh cli); FT_DATA, FT_DEVICE (cuda) to change.
# PRE_STEPS=N (default 0: off): a fine-tune of trained weights rather than of random ones, as a user's fine-tune starts
# from a pretrained model: first one bf16 run of N steps on the first PRE_SPLIT records of the data (default 2000),
# exported at its end into its run directory (in fp32 for a preset: the masters' bits), then each of FT_RUNS starts
# from that export (model.path) and trains on the records after PRE_SPLIT, which the first run never saw, at FT_LR
# (default 1e-4 in this mode, 3e-4 otherwise). The device has no Hub access, so the pretrained model is made here.
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
OUT=${OUT:-$ROOT/out}
mkdir -p "$OUT"
cli=${FSDP4J_CLI:-bash tools/gpu/run.sh cli}
# a preset has no tokenizer and Alpaca data given directly needs one: its bytes, as token files
prepare() { # prepare JSONL DIR: the records as byte tokens
  rm -rf "$2"
  # shellcheck disable=SC2086 # cli is a command line
  $cli prepare --tokenizer bytes --input "$1" --out "$2" 2>&1 | grep -v WARNING | tail -1 | tee -a "$OUT/ft.log"
}
: > "$OUT/ft.log"
source=${FT_DATA:-src/main/resources/demo/instructions.jsonl}
model=(--set model.preset="${FT_MODEL:-qwen2.5-0.5b}")
lr=${FT_LR:-3e-4}
if (( ${PRE_STEPS:-0} > 0 )); then
  split=${PRE_SPLIT:-2000}
  head -n "$split" "$source" > /tmp/ft-pre.jsonl
  tail -n +"$((split + 1))" "$source" > /tmp/ft-tune.jsonl
  prepare /tmp/ft-pre.jsonl /tmp/ft-pre-data
  prepare /tmp/ft-tune.jsonl /tmp/ft-data
  rm -rf /tmp/ft-pre
  t0=$SECONDS
  # shellcheck disable=SC2086 # cli is a command line
  timeout "${PRE_TIMEOUT:-200}" $cli train "${model[@]}" --set data.train=/tmp/ft-pre-data \
    --set data.seq_len="${FT_SEQ:-512}" --set data.pack=true --set train.batch_size="${FT_BATCH:-8}" \
    --set train.steps="$PRE_STEPS" --set optim.lr=3e-4 --set dist.device="${FT_DEVICE:-cuda}" --set dist.ranks=1 \
    --set fsdp.param_dtype=bf16 --set fsdp.activation_checkpointing=full --set log.every=50 \
    --set checkpoint.dir=/tmp/ft-pre/checkpoints --set checkpoint.every="$PRE_STEPS" --set run.dir=/tmp/ft-pre \
    > /tmp/ft-pre.log 2>&1
  echo "pretraining: exit $? ($((SECONDS - t0)) s), $(grep -o '"final_loss":[0-9.]*' /tmp/ft-pre.log)" \
    | tee -a "$OUT/ft.log"
  model=(--set model.path=/tmp/ft-pre/export) # the run's own export: fp32 for a preset, the masters' bits
  lr=${FT_LR:-1e-4}
else
  prepare "$source" /tmp/ft-data
fi
data=/tmp/ft-data
run() {
  local name=$1 dt=${1%%-*} t0=$SECONDS seed=()
  [[ $name == *-seed* ]] && seed=(--set train.seed="${name##*-seed}") # another seed: other random weights and batch order
  [[ $name == *-rowwise* ]] && seed+=(--set fsdp.fp8_recipe=rowwise) # fp8's scales per row
  # shellcheck disable=SC2086 # cli is a command line
  timeout "${FT_TIMEOUT:-150}" $cli train "${model[@]}" --set data.train="$data" \
    --set data.seq_len="${FT_SEQ:-512}" --set data.pack=true --set train.batch_size="${FT_BATCH:-8}" \
    --set train.steps="${FT_STEPS:-500}" --set optim.lr="$lr" --set dist.device="${FT_DEVICE:-cuda}" \
    --set dist.ranks=1 --set fsdp.param_dtype="$dt" --set fsdp.activation_checkpointing=full "${seed[@]}" \
    --set log.metrics="/tmp/ft-$name/metrics.jsonl" --set log.every=1 --set checkpoint.dir= --set run.dir="/tmp/ft-$name" \
    > "/tmp/ft-$name.log" 2>&1
  local status=$?
  cp "/tmp/ft-$name/metrics.jsonl" "$OUT/ft-$name.jsonl" 2>/dev/null # not its plots/: $OUT brings back 8 files at most
  echo "fine-tune $name: exit $status ($((SECONDS - t0)) s), $(grep -c '"loss":' "$OUT/ft-$name.jsonl" 2>/dev/null) steps logged"
}
# FT_RUNS: the runs, each a dtype with an optional -suffix (default "bf16 fp8"; "bf16 bf16-again": bf16's own
# run-to-run spread on the GPU; a suffix -seedN trains with train.seed=N: other random weights and batch order, the
# spread a curve has from its seed alone; a suffix -rowwise, with fp8: fsdp.fp8_recipe=rowwise); the first two are compared
read -r -a runs <<< "${FT_RUNS:-bf16 fp8}"
for name in "${runs[@]}"; do rm -rf "$OUT/ft-$name.jsonl" "/tmp/ft-$name"; done
if [[ ${CONCURRENT:-1} == 1 ]]; then
  for name in "${runs[@]}"; do run "$name" > "/tmp/ft-$name.status" & done
  wait
  for name in "${runs[@]}"; do cat "/tmp/ft-$name.status"; done
else
  for name in "${runs[@]}"; do run "$name"; done
fi | tee -a "$OUT/ft.log"
for name in "${runs[@]}"; do
  { echo "=== $name"; grep -vE '^step |WARNING' "/tmp/ft-$name.log" | cut -c1-600 | tail -8; } >> "$OUT/ft.log"
done
bash "$ROOT/tools/gpu/fp8_compare.sh" "$OUT/ft-${runs[0]}.jsonl" "$OUT/ft-${runs[1]}.jsonl" "${FT_WINDOW:-50}" \
  | tee -a "$OUT/ft.log"
