#!/bin/bash
# Two runs' loss curves side by side (fp8 against bf16, issue 26): the mean of the step losses of each window of
# WINDOW steps (default 50) in both metrics files (fsdp4j's log.metrics, a JSON line a step), and fp8's against
# bf16's in percent; the steps both runs logged, the rest left out. Usage: fp8_compare.sh BF16.jsonl FP8.jsonl [WINDOW]
: "${2:?usage: fp8_compare.sh BF16.jsonl FP8.jsonl [WINDOW]}"
awk -v w="${3:-50}" '
  function field(line, key,    m) {
    if (match(line, "\"" key "\":[-0-9.eE+]+")) { m = substr(line, RSTART, RLENGTH); sub(/^[^:]*:/, "", m); return m }
    return ""
  }
  /"summary":true/ { next }
  { s = field($0, "step"); l = field($0, "loss"); if (s == "" || l == "") next
    s += 0; if (FNR == NR) { a[s] = l; if (s > na) na = s } else { b[s] = l; if (s > nb) nb = s } }
  END {
    n = na < nb ? na : nb
    printf "%-11s %12s %12s %9s\n", "steps", "bf16 loss", "fp8 loss", "fp8 vs"
    worst = 0
    for (lo = 1; lo <= n; lo += w) {
      hi = lo + w - 1; if (hi > n) hi = n
      sa = sb = c = 0
      for (s = lo; s <= hi; s++) if ((s in a) && (s in b)) { sa += a[s]; sb += b[s]; c++ }
      if (c == 0) continue
      d = 100 * (sb / c - sa / c) / (sa / c)
      if (d < 0 ? -d > worst : d > worst) worst = d < 0 ? -d : d
      printf "%-11s %12.4f %12.4f %+8.2f%%\n", lo "-" hi, sa / c, sb / c, d
    }
    printf "steps in both: %d; largest window difference %.2f%%\n", n, worst
  }' "$1" "$2"
