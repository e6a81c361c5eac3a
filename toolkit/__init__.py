"""The CUDA toolkit and the machine it runs on: where the tools are (toolchain), what they print
(diagnostics: nvcc and ptxas output), the GPUs, counters and profilers this host has (probes), and the
CUTLASS/CuTe sources (headers, index). Facts that compile, sass, run, analyze and capabilities share
without importing each other. Kept light: fast.py imports cutlass_headers into candidates."""
