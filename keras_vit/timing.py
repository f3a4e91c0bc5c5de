"""How keras_vit times a call: the one rule every benchmark follows.

`keras-vit benchmark` (`keras_vit.benchmark`), `keras-vit benchmark-export`
(`keras_vit.export.latency`) and the checkout's `benchmarks/suite.py` with
its timm peer all time with the
functions here: untimed warm-up calls, then timed calls until there are at
least `steps` of them and they add up to at least `min_seconds`; the figure
is the median call (or a percentile), with the CPU cores the process kept
busy and its peak memory beside it.

This module imports the standard library only and nothing of keras_vit, so
that a program run in an interpreter without TensorFlow (the timm peer,
`benchmarks/peers/timm_peer.py`) loads it by its path and times by
the same rule.
"""

import json
import math
import time

#: What a measurement run in its own process prints before its result
#: (JSON), so that the result is found among whatever else it prints.
RESULT_PREFIX = "RESULT "


def latencies(fn, steps, warmup, min_seconds=0.0):
    """Seconds of each timed call of `fn`, after `warmup` untimed calls.

    Calls are timed until there are at least `steps` of them and together
    they took at least `min_seconds`: a fast call (ViT-Ti/16 at batch 1,
    tens of milliseconds on a CPU) is then sampled often enough for a
    stable median, while a slow one (a B/16 training step) still runs
    `steps` times.
    """
    for _ in range(warmup):
        fn()
    times = []
    while len(times) < steps or sum(times) < min_seconds:
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return times


def seconds_and_cores(fn, steps, warmup, min_seconds=0.0):
    """The median seconds per call of `fn` (see `latencies` for which
    calls), and the CPU cores the process kept busy meanwhile.

    The median, not the mean: on shared machines, whose timings drift
    between runs (`benchmarks/results/2026-11-29-export-latency-ti16.md`),
    one stalled step otherwise moves the figure.

    Cores busy is the process's CPU time over the wall time of the timed
    calls: 2.0 on two cores means both were running throughout, whether
    computing or spinning while they wait for work (PyTorch's OpenMP
    threads spin between ops; TensorFlow's pool sleeps, and waking it
    costs time on a VM).
    """
    for _ in range(warmup):
        fn()
    cpu, wall = time.process_time(), time.perf_counter()
    times = latencies(fn, steps, 0, min_seconds)
    cores = (time.process_time() - cpu) / max(time.perf_counter() - wall, 1e-9)
    return percentile(times, 50), cores


def median_seconds(fn, steps, warmup, min_seconds=0.0):
    """The median seconds per call of `fn` (`seconds_and_cores`'s first)."""
    return seconds_and_cores(fn, steps, warmup, min_seconds)[0]


def percentile(values, q):
    """The `q`-th percentile of `values`, interpolated linearly between the
    two nearest (NumPy's default method); `q=50` is the median."""
    ordered = sorted(values)
    if not ordered:
        raise ValueError("`values` must not be empty. Received: values=[]")
    position = (len(ordered) - 1) * q / 100.0
    low = math.floor(position)
    high = min(low + 1, len(ordered) - 1)
    return float(
        ordered[low] + (ordered[high] - ordered[low]) * (position - low)
    )


def peak_rss_mb():
    """The peak resident memory of this process so far, in MB (Linux)."""
    import resource  # not on Windows, where nothing else here fails

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def print_result(result):
    """Prints a measurement's `result` (a dict) as the line that
    `benchmarks/suite.py` reads back from a measurement's process."""
    print(RESULT_PREFIX + json.dumps(result), flush=True)


def read_result(process):
    """The result a measurement's process printed (`print_result`), from
    its `subprocess.CompletedProcess`; else `{"error": why}`: the signal
    that killed it, or the last line it wrote to stderr."""
    for line in process.stdout.splitlines():
        if line.startswith(RESULT_PREFIX):
            return json.loads(line[len(RESULT_PREFIX) :])
    if process.returncode is not None and process.returncode < 0:
        # Killed by a signal: SIGKILL here is almost always the kernel's
        # out-of-memory killer, and stderr's last line is unrelated.
        return {
            "error": f"killed by signal {-process.returncode} (out of memory?)"
        }
    last = (process.stderr.strip().splitlines() or ["no output"])[-1]
    return {"error": last[:200]}
