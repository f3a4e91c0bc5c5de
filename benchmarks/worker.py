"""One `measure` in a process of its own: how `benchmarks/suite.py` runs
each row of its table (`suite.measure_in_subprocess`).

    python benchmarks/worker.py '{"peer": "keras_vit", "variant": "Ti/16", ...}'

The argument is `measurement.measure`'s keyword arguments as JSON; the
result is printed as one line, `RESULT {json}`
(`keras_vit.timing.print_result`). A failure is a traceback on stderr,
whose last line the suite reports.
"""

import json
import sys

import measurement

from keras_vit import timing


def main(argv=None):
    """Runs `measure(**json.loads(argv[0]))` and prints its result."""
    argv = sys.argv[1:] if argv is None else argv
    timing.print_result(measurement.measure(**json.loads(argv[0])))


if __name__ == "__main__":
    main()
