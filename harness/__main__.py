"""The harness' command line, run in the sandbox:

    python -s -m kernelscope.harness CONFIG.json RESULT.json   # one job
    python -s -m kernelscope.harness --serve                   # the fork server
"""

from __future__ import annotations

import sys

from kernelscope.harness.job import run_job
from kernelscope.harness.server import serve


def main(argv: list[str]) -> int:
    if argv[1:] == ["--serve"]:
        return serve()
    if len(argv) != 3:
        sys.stderr.write("usage: python -m kernelscope.harness CONFIG.json RESULT.json | --serve\n")
        return 2
    return run_job(argv[1], argv[2])


if __name__ == "__main__":
    sys.exit(main(sys.argv))
