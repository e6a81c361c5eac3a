"""Expert rules that turn measurements into findings (``kernelscope.models.Finding``).

One module per family; each rule is a small function registered with :func:`registry.rule`, with
its id, family, the inputs it needs, named thresholds (defaults stated, overridable) and text that
carries the numbers. ``run_rules(scope, data)`` runs every rule of a scope and ranks the findings.
"""

from kernelscope.heuristics.registry import REGISTRY, Rule, merge, rank, rule, run_rules


def load_all() -> None:
    """Import every rule module so the registry is complete."""
    from kernelscope.heuristics import (  # noqa: F401
        compute,
        control,
        instructions,
        latency,
        launch,
        memory,
        occupancy,
        resources,
        stalls,
        system,
    )


__all__ = ["REGISTRY", "Rule", "load_all", "merge", "rank", "rule", "run_rules"]
