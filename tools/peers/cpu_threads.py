"""Where a run's CPU seconds go, by thread: runs a command (a `bin/fsdp4j` run or a `java` line), reads the
user + system CPU of each of its threads from /proc every 0.2 s while it runs, and prints, after it ends, its wall
time, the process's CPU seconds (user + system, from the kernel's account of the finished child) and the CPU seconds
of its threads grouped by name: rank-N (the CPU ranks), fsdp4j-cpu-help (the loop helpers), C2/C1 CompilerThread
(the JIT), GC, main (start-up, plots, export). A thread that ends between two reads loses at most 0.2 s of its
account; the process total is exact. Linux only. On a shared machine compare CPU seconds, not wall time.

Run: python3 tools/peers/cpu_threads.py bin/fsdp4j train --set run.dir=/tmp/demo-1
     python3 tools/peers/cpu_threads.py --out run.log bin/fsdp4j train   (the command's output to run.log)
"""
import argparse
import collections
import os
import resource
import subprocess
import sys
import time


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", help="file for the command's output (default: this process's standard error)")
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    if not args.command:
        parser.error("give the command to run")
    out = open(args.out, "w") if args.out else sys.stderr
    ticks = os.sysconf("SC_CLK_TCK")
    start = time.time()
    child = subprocess.Popen(args.command, stdout=out, stderr=subprocess.STDOUT)
    seen = {}  # thread id -> (name, cpu seconds), the last read
    while child.poll() is None:
        try:
            tids = os.listdir(f"/proc/{child.pid}/task")
        except OSError:
            tids = []
        for tid in tids:
            try:
                with open(f"/proc/{child.pid}/task/{tid}/stat") as f:
                    stat = f.read()
            except OSError:
                continue  # the thread ended
            name = stat[stat.index("(") + 1:stat.rindex(")")]
            fields = stat[stat.rindex(")") + 2:].split()
            seen[tid] = (name, (int(fields[11]) + int(fields[12])) / ticks)  # utime, stime
        time.sleep(0.2)
    wall = time.time() - start
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    groups = collections.defaultdict(lambda: [0.0, 0])
    for name, cpu in seen.values():
        key = "GC" if name.startswith("GC Thread") else "main" if name == "java" else name
        groups[key][0] += cpu
        groups[key][1] += 1
    print(f"wall {wall:.1f} s, CPU {usage.ru_utime + usage.ru_stime:.1f} s (user {usage.ru_utime:.1f}, "
          f"system {usage.ru_stime:.1f}), exit status {child.returncode}")
    for name, (cpu, count) in sorted(groups.items(), key=lambda g: -g[1][0]):
        if cpu >= 0.05:
            print(f"  {name:24s} {count:3d} thread{'s' if count > 1 else ' '} {cpu:7.2f} s")
    sys.exit(child.returncode)


if __name__ == "__main__":
    main()
