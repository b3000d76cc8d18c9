#!/bin/bash
# fsdp.param_copy on one GPU: the GPU tests of the kept copy, then Qwen2.5-7B (the bench's settings: bf16 parameters,
# fp32 reduction, full checkpointing, batch 1) with the copy rounded at each gather and kept, each run under BT
# seconds (default 140). SEQS: the sequence lengths (default 2048); COPIES: the settings to run (default
# "per_gather kept"); PROFILE=1: the last run of each length profiled (--profile --profile-ops 14); PEER=1: the PyTorch
# FSDP2 peer (.devrt/peers/pytorch_fsdp2_bench.py, eager; PEER_COMPILE=1 compiled too) after each length's runs;
# RANKS=N: N GPUs (default 1), both sides.
cd "$(dirname "$0")/../.."
OUT=${OUT:-out}; mkdir -p "$OUT"
if [[ -z ${SKIP_TESTS:-} ]]; then
  TEST_CLASSES="${TEST_CLASSES:-CudaAdamWGpuTest}" TEST_CLASS_TIMEOUT=${TEST_CLASS_TIMEOUT:-90} bash tools/gpu/session.sh tests \
    > "$OUT/tests.log" 2>&1
  echo "tests: exit $?"; grep -E "tests (successful|failed|aborted)|FAILED|Caused by" "$OUT/tests.log" | head -8
fi
for seq in ${SEQS:-2048}; do
  copies=(${COPIES:-per_gather kept})
  for copy in "${copies[@]}"; do
    prof=()
    [[ -n ${PROFILE:-} && $copy == "${copies[-1]}" ]] && prof=(--profile --profile-ops 14)
    t0=$SECONDS
    timeout ${BT:-140} bash tools/gpu/run.sh cli bench --warmup 2 --steps 4 "${prof[@]}" --set model.preset=qwen2.5-7b \
      --set dist.device=cuda --set dist.ranks=${RANKS:-1} --set fsdp.param_dtype=bf16 --set fsdp.reduce_dtype=fp32 \
      --set fsdp.activation_checkpointing=full --set data.seq_len=$seq --set fsdp.param_copy=$copy \
      > "$OUT/bench-$copy-$seq${RANKS:+-x$RANKS}.log" 2>&1
    echo "fsdp4j param_copy=$copy seq $seq: exit $? ($((SECONDS - t0)) s)"
    grep -E '^error|Exception' "$OUT/bench-$copy-$seq${RANKS:+-x$RANKS}.log" | head -3
    grep -E 'adamw|cast_f32|sumsq|step .*ms' "$OUT/bench-$copy-$seq${RANKS:+-x$RANKS}.log" | head -8
    tail -1 "$OUT/bench-$copy-$seq${RANKS:+-x$RANKS}.log" | cut -c1-420
  done
  if [[ -n ${PEER:-} ]]; then
    for compiled in 0 ${PEER_COMPILE:+1}; do
      t0=$SECONDS
      timeout ${PT:-150} python3 -m torch.distributed.run --standalone --nproc_per_node=${RANKS:-1} .devrt/peers/pytorch_fsdp2_bench.py \
        --model 7b --seq $seq --warmup 2 --steps 4 --ac 1 --compile $compiled > "$OUT/peer$compiled-$seq.log" 2>&1
      echo "peer compile=$compiled seq $seq: exit $? ($((SECONDS - t0)) s)"; grep '^{' "$OUT/peer$compiled-$seq.log" | tail -1 | cut -c1-420
    done
  fi
done
