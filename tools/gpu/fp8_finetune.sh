#!/bin/bash
# fp8's fine-tune beside bf16's (issue 26, (a)): FT_MODEL (default qwen2.5-0.5b, random weights: the device has no
# Hub access) trained FT_STEPS steps (default 500) on the demo's instructions (FT_DATA, Alpaca: tokenized into bytes by
# `fsdp4j prepare --tokenizer bytes`, the answers carrying the loss, packed into FT_SEQ-token sequences, default 512;
# FT_BATCH sequences a step, default 8), full activation checkpointing, once in bf16 and once
# in fp8, the same seed and so the same batches, both at once on the one GPU (CONCURRENT=0: one after the other). Each
# run under FT_TIMEOUT seconds (default 150). Writes $OUT/ft-bf16.jsonl and $OUT/ft-fp8.jsonl (the metrics, a line a
# step), their output into $OUT/ft.log, then the comparison (tools/gpu/fp8_compare.sh) there and on stdout.
# FSDP4J_CLI: the command that runs fsdp4j (default: bash tools/gpu/run.sh cli); FT_DATA, FT_DEVICE (cuda) to change.
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
OUT=${OUT:-$ROOT/out}
mkdir -p "$OUT"
cli=${FSDP4J_CLI:-bash tools/gpu/run.sh cli}
# a preset has no tokenizer and Alpaca data given directly needs one: its bytes, as token files
rm -rf /tmp/ft-data
# shellcheck disable=SC2086 # cli is a command line
$cli prepare --tokenizer bytes --input "${FT_DATA:-src/main/resources/demo/instructions.jsonl}" --out /tmp/ft-data \
  2>&1 | grep -v WARNING | tail -1 | tee "$OUT/ft.log"
data=/tmp/ft-data
run() {
  local name=$1 dt=${1%%-*} t0=$SECONDS seed=()
  [[ $name == *-seed* ]] && seed=(--set train.seed="${name##*-seed}") # another seed: other random weights and batch order
  # shellcheck disable=SC2086 # cli is a command line
  timeout "${FT_TIMEOUT:-150}" $cli train --set model.preset="${FT_MODEL:-qwen2.5-0.5b}" --set data.train="$data" \
    --set data.seq_len="${FT_SEQ:-512}" --set data.pack=true --set train.batch_size="${FT_BATCH:-8}" \
    --set train.steps="${FT_STEPS:-500}" --set optim.lr="${FT_LR:-3e-4}" --set dist.device="${FT_DEVICE:-cuda}" \
    --set dist.ranks=1 --set fsdp.param_dtype="$dt" --set fsdp.activation_checkpointing=full "${seed[@]}" \
    --set log.metrics="/tmp/ft-$name/metrics.jsonl" --set log.every=1 --set checkpoint.dir= --set run.dir="/tmp/ft-$name" \
    > "/tmp/ft-$name.log" 2>&1
  local status=$?
  cp "/tmp/ft-$name/metrics.jsonl" "$OUT/ft-$name.jsonl" 2>/dev/null # not its plots/: $OUT brings back 8 files at most
  echo "fine-tune $name: exit $status ($((SECONDS - t0)) s), $(grep -c '"loss":' "$OUT/ft-$name.jsonl" 2>/dev/null) steps logged"
}
# FT_RUNS: the runs, each a dtype with an optional -suffix (default "bf16 fp8"; "bf16 bf16-again": bf16's own
# run-to-run spread on the GPU; a suffix -seedN trains with train.seed=N: other random weights and batch order, the
# spread a curve has from its seed alone); the first two are compared
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
