#!/bin/bash
# Qwen2.5-7B at seq $SEQ in fp8 and bf16 on one GPU (the bench's settings), each under BT seconds (default 170)
: "${SEQ:?SEQ=N: the sequence length}"
for dt in fp8 bf16; do
  t0=$SECONDS
  timeout ${BT:-170} bash tools/gpu/run.sh cli bench --warmup 2 --steps 4 --set model.preset=qwen2.5-7b --set dist.device=cuda \
    --set dist.ranks=1 --set fsdp.param_dtype=$dt --set fsdp.reduce_dtype=fp32 --set fsdp.activation_checkpointing=full \
    --set data.seq_len=$SEQ > $OUT/bench-$dt-$SEQ.log 2>&1
  echo "fsdp4j $dt $SEQ: exit $? ($((SECONDS - t0)) s)"; grep -E '^error|Exception|attention' $OUT/bench-$dt-$SEQ.log | head -3; tail -1 $OUT/bench-$dt-$SEQ.log | cut -c1-420
done
