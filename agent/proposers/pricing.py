"""The estimated cost of a run's LLM calls, from the model's list price."""

from __future__ import annotations

import os

# List prices in USD per million tokens (input, output), for the run's cost estimate; a model not listed
# gets no estimate unless KERNELSCOPE_LLM_PRICE="input,output" gives its prices.
PRICES_PER_MTOK: dict[str, tuple[float, float]] = {
    "claude-opus-4-1": (15.0, 75.0), "claude-opus-4": (15.0, 75.0), "claude-sonnet-4-5": (3.0, 15.0),
    "claude-sonnet-4": (3.0, 15.0), "claude-haiku-4-5": (1.0, 5.0), "gpt-4o": (2.5, 10.0), "gpt-4.1": (2.0, 8.0),
    "gpt-4o-mini": (0.15, 0.6), "gpt-5": (1.25, 10.0),
}


def llm_cost_usd(model: str | None, tokens: dict[str, int]) -> float | None:
    """Estimated cost of ``tokens`` ({"input": n, "output": n}) on ``model``, or None if its price is unknown."""
    env = os.environ.get("KERNELSCOPE_LLM_PRICE")
    price: tuple[float, float] | None = None
    if env:
        try:
            a, b = (float(x) for x in env.split(","))
            price = (a, b)
        except ValueError:
            raise ValueError(f"KERNELSCOPE_LLM_PRICE={env!r}: expected 'input,output' USD per million tokens") from None
    elif model:
        price = next((v for k, v in sorted(PRICES_PER_MTOK.items(), key=lambda kv: -len(kv[0]))
                      if model.startswith(k)), None)
    if price is None:
        return None
    return round((tokens.get("input", 0) * price[0] + tokens.get("output", 0) * price[1]) / 1e6, 4)


