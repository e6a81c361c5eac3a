"""The evaluation harness: runs inside a sandboxed process, one job per process.

    python -s -m kernelscope.harness CONFIG.json RESULT.json

Self-contained on purpose: it imports the stdlib, torch, numpy, pynvml (for energy) and its own
modules, never the rest of kernelscope (the limit code of ``sandbox/limits.py``, stdlib only, is
loaded by its path), so untrusted candidate code shares its process with nothing of the server. The
method follows KernelBench and GPU MODE's reference kernels and goes past them:

- ``correctness``: several trials with fresh seeded random inputs, a tolerance policy by dtype that
  is written into the answer, NaN/Inf always failing, shapes/dtypes compared, memory poisoned before
  each candidate call (unwritten outputs show up as NaN), inputs checked for mutation;
- ``timing`` and ``stats``: CUDA events after warm-up, reference and candidate interleaved
  (alternating order), many runs, medians with IQR/CV, and a bootstrap confidence interval for the
  speedup;
- ``observers``: pluggable measurements around the timed rounds: the L2 flush before every call and
  its probe of other memory traffic, the host cover, the side-stream check, energy from NVML;
- ``cheats``: reference torch ops doing the main work, try/except fallbacks, timer/Event
  monkey-patching, results cached across calls, lazy or aliased outputs, precision downgrades (TF32
  on fp32 problems), implausible speedups;
- ``protocol``: the CONFIG and RESULT JSON, flags, notes and phases; ``job``: one job, start to end;
  ``server``: the fork server and its children.
"""
