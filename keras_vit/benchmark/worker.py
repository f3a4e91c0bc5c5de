"""One `measure` in a process of its own: how `keras-vit benchmark` runs
each row of its table (`keras_vit.benchmark.suite.measure_in_subprocess`).

    python -m keras_vit.benchmark.worker \\
        '{"peer": "keras_vit", "variant": "Ti/16", ...}'

The argument is `keras_vit.benchmark.measure`'s keyword arguments as JSON;
the result is printed as one line, `RESULT {json}`
(`keras_vit.timing.print_result`). A failure is a traceback on stderr,
whose last line the suite reports.
"""

import json
import sys

from keras_vit import timing
from keras_vit.benchmark import throughput


def main(argv=None):
    """Runs `measure(**json.loads(argv[0]))` and prints its result."""
    argv = sys.argv[1:] if argv is None else argv
    timing.print_result(throughput.measure(**json.loads(argv[0])))


if __name__ == "__main__":
    main()
