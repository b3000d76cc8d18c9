"""Where a run's CPU seconds go, by thread: runs a command (a `bin/fsdp4j` run or a `java` line), reads the
user + system CPU of each of its threads from /proc every 0.2 s while it runs, and prints, after it ends, its wall
time, the process's CPU seconds (user + system, from the kernel's account of the finished child) and the CPU seconds
of its threads grouped by name: rank-N (the CPU ranks), fsdp4j-cpu-help (the loop helpers), C2/C1 CompilerThread
(the JIT), GC, main (start-up, plots, export). A thread that ends between two reads loses at most 0.2 s of its
account; the process total is exact. Linux only. On a shared machine compare CPU seconds, not wall time.

--phases: also splits the run by its output: each line the command prints (standard output and error together) is
a mark, read as it comes; at the marks that begin a phase (the first line, the held-out evaluations, steps 1, 2, 10,
100, 200 and every line that is not a step's) the wall time and every group's CPU seconds so far are taken, and
after the run a table gives, for each phase, its wall seconds and the CPU seconds each group spent in it. The lines
before the first mark are the JVM's start and the set-up before the command's first output.

Run: python3 tools/peers/cpu_threads.py bin/fsdp4j train --set run.dir=/tmp/demo-1
     python3 tools/peers/cpu_threads.py --out run.log bin/fsdp4j train   (the command's output to run.log)
     python3 tools/peers/cpu_threads.py --phases --out run.log bin/fsdp4j train --set run.dir=/tmp/demo-2
"""
import argparse
import collections
import os
import re
import resource
import subprocess
import sys
import threading
import time

STEP = re.compile(r"^step +(\d+)/(\d+) ")


def group(name):
    return "GC" if name.startswith("GC Thread") else "main" if name == "java" else name


def read_threads(pid, seen):
    """Reads every thread of pid into seen (thread id -> (name, cpu seconds))."""
    ticks = os.sysconf("SC_CLK_TCK")
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/stat") as f:
                stat = f.read()
        except OSError:
            continue  # the thread ended
        name = stat[stat.index("(") + 1:stat.rindex(")")]
        fields = stat[stat.rindex(")") + 2:].split()
        seen[tid] = (name, (int(fields[11]) + int(fields[12])) / ticks)  # utime, stime


def totals(seen):
    groups = collections.defaultdict(float)
    for name, cpu in seen.values():
        groups[group(name)] += cpu
    return groups


def is_mark(line):
    m = STEP.match(line)
    if not m:
        return True
    step, steps = int(m.group(1)), int(m.group(2))
    return step in (1, 2, 10, steps // 2, steps)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", help="file for the command's output (default: this process's standard error)")
    parser.add_argument("--phases", action="store_true", help="split the run's wall and CPU seconds by its output")
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    if not args.command:
        parser.error("give the command to run")
    out = open(args.out, "w") if args.out else sys.stderr
    start = time.time()
    seen = {}  # thread id -> (name, cpu seconds), the last read
    lock = threading.Lock()
    marks = []  # (label, wall seconds, {group: cpu seconds})
    if args.phases:
        child = subprocess.Popen(args.command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)

        def follow():
            for line in child.stdout:
                out.write(line)
                if is_mark(line):
                    with lock:
                        read_threads(child.pid, seen)
                        marks.append((line.strip()[:60], time.time() - start, dict(totals(seen))))
            out.flush()

        reader = threading.Thread(target=follow, daemon=True)
        reader.start()
    else:
        child = subprocess.Popen(args.command, stdout=out, stderr=subprocess.STDOUT)
        reader = None
    while child.poll() is None:
        with lock:
            read_threads(child.pid, seen)
        time.sleep(0.2)
    if reader:
        reader.join()
    wall = time.time() - start
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    groups = collections.defaultdict(lambda: [0.0, 0])
    for name, cpu in seen.values():
        groups[group(name)][0] += cpu
        groups[group(name)][1] += 1
    print(f"wall {wall:.1f} s, CPU {usage.ru_utime + usage.ru_stime:.1f} s (user {usage.ru_utime:.1f}, "
          f"system {usage.ru_stime:.1f}), exit status {child.returncode}")
    for name, (cpu, count) in sorted(groups.items(), key=lambda g: -g[1][0]):
        if cpu >= 0.05:
            print(f"  {name:24s} {count:3d} thread{'s' if count > 1 else ' '} {cpu:7.2f} s")
    if args.phases:
        final = {name: cpu for name, (cpu, _) in groups.items()}
        shown = [name for name, (cpu, _) in sorted(groups.items(), key=lambda g: -g[1][0]) if cpu >= 0.3]
        short = {"C2 CompilerThre": "C2", "C1 CompilerThre": "C1", "fsdp4j-cpu-help": "helpers"}
        print("phase (from the line to the next)                              wall    CPU  "
              + " ".join(f"{short.get(n, n):>7s}" for n in shown))
        rows = [("(start: the JVM until the first line)", 0.0, {})] + marks + [("(end: the process exits)", wall, final)]
        for (label, t0, c0), (_, t1, c1) in zip(rows, rows[1:]):
            cpu = sum(c1.values()) - sum(c0.values())
            print(f"  {label:60s} {t1 - t0:6.2f} {cpu:6.2f}  "
                  + " ".join(f"{c1.get(n, 0) - c0.get(n, 0):7.2f}" for n in shown))
    sys.exit(child.returncode)


if __name__ == "__main__":
    main()
