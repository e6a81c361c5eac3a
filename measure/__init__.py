"""Measurement backends: the Nsight Compute report reader, the CUPTI metric collector and activity
tracer (with their native sources), and timelines. They measure; heuristics/ interprets."""
