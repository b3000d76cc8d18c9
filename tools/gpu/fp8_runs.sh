#!/bin/bash
# fp8 on the GPU: its tests, the linears' rates, Qwen2.5-7B at seq 2048 in bf16 and fp8 (one GPU, the bench's settings)
TEST_CLASSES="GpuFp8Test" TEST_CLASS_TIMEOUT=100 bash tools/gpu/session.sh tests 2>&1 | grep -E 'tests (successful|failed)|✘' | head -12
timeout 70 bash tools/gpu/run.sh test-main io.fsdp4j.gpu.Fp8Rates 2048 2>&1 | grep -v WARN | tail -12
for dt in bf16 fp8; do
  t0=$SECONDS
  timeout 150 bash tools/gpu/run.sh cli bench --warmup 2 --steps 4 --set model.preset=qwen2.5-7b --set dist.device=cuda \
    --set dist.ranks=1 --set fsdp.param_dtype=$dt --set fsdp.reduce_dtype=fp32 --set fsdp.activation_checkpointing=full \
    --set data.seq_len=2048 > $OUT/bench-$dt.log 2>&1
  echo "fsdp4j $dt: exit $? ($((SECONDS - t0)) s)"; grep -E '^error|Exception' $OUT/bench-$dt.log | head -3; tail -1 $OUT/bench-$dt.log | cut -c1-600
done
