#!/bin/bash
# fp8 on the GPU: its tests, the linears' rates, then Qwen2.5-7B at SEQ (default 2048) in fp8 and bf16
# (tools/gpu/fp8_seq.sh: one GPU, the bench's settings)
TEST_CLASSES="GpuFp8Test" TEST_CLASS_TIMEOUT=100 bash tools/gpu/session.sh tests 2>&1 | grep -E 'tests (successful|failed)|✘' | head -12
timeout 70 bash tools/gpu/run.sh test-main io.fsdp4j.gpu.Fp8Rates 2048 2>&1 | grep -v WARN | tail -12
SEQ=${SEQ:-2048} BT=${BT:-150} bash tools/gpu/fp8_seq.sh
