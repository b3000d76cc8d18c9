#!/bin/bash
# Qwen2.5-7B at seq $SEQ in fp8 and bf16 on one GPU (the bench's settings), each under BT seconds (default 170), into
# $OUT/bench-DTYPE-SEQ.log. DTYPES: which (default "fp8 bf16"); FP8_ARGS: more bench arguments for the fp8 run (e.g.
# "--profile --profile-ops 40": a kernel profile of one more step); ARGS: more bench arguments for every run (e.g.
# "--set fsdp.param_copy=kept"), TAG: a word in the logs' names for them; LAYERS=N: the first N blocks (a GPU under 100 GB:
# the whole 7B does not fit); FSDP4J_CLI: the command that runs fsdp4j (default: bash tools/gpu/run.sh cli).
: "${SEQ:?SEQ=N: the sequence length}"
cli=${FSDP4J_CLI:-bash tools/gpu/run.sh cli}
layers=(); [[ -n ${LAYERS:-} ]] && layers=(--set model.layers="$LAYERS")
for dt in ${DTYPES:-fp8 bf16}; do
  t0=$SECONDS
  extra=(); [[ $dt == fp8 ]] && read -r -a extra <<< "${FP8_ARGS:-}"
  read -r -a both <<< "${ARGS:-}"
  log=$OUT/bench-$dt${TAG:+-$TAG}-$SEQ.log
  # shellcheck disable=SC2086 # cli is a command line
  timeout ${BT:-170} $cli bench --warmup 2 --steps 4 --set model.preset=qwen2.5-7b --set dist.device=cuda \
    --set dist.ranks=1 --set fsdp.param_dtype=$dt --set fsdp.reduce_dtype=fp32 --set fsdp.activation_checkpointing=full \
    --set data.seq_len=$SEQ "${layers[@]}" "${both[@]}" "${extra[@]}" > "$log" 2>&1
  echo "fsdp4j $dt ${TAG:+$TAG }$SEQ: exit $? ($((SECONDS - t0)) s)"; grep -E '^error|Exception|attention' "$log" | head -3
  grep '^{' "$log" | tail -1 | cut -c1-420
done
