#!/bin/bash
# fp8 on the GPU (issue 26), after tools/gpu/pack.sh: its tests (GpuFp8Test), the fine-tune beside bf16's
# (tools/gpu/fp8_finetune.sh: Qwen2.5-0.5B, 500 steps, the loss by 50-step window), then Qwen2.5-7B at each of SEQS
# (default "2048 8192") in fp8 and bf16 (tools/gpu/fp8_seq.sh: one GPU, the bench's settings), the first fp8 run with a
# kernel profile of one more step (bench --profile --profile-ops 40). SKIP_FT=1 leaves the fine-tune out.
TEST_CLASSES="GpuFp8Test" TEST_CLASS_TIMEOUT=150 bash tools/gpu/session.sh tests 2>&1 | grep -E 'tests (successful|failed)|✘' | head -12
[[ -z ${SKIP_FT:-} ]] && bash tools/gpu/fp8_finetune.sh
profile="--profile --profile-ops 40"
for s in ${SEQS:-2048 8192}; do
  SEQ=$s BT=${BT:-150} FP8_ARGS="$profile" bash tools/gpu/fp8_seq.sh
  profile=""
done
