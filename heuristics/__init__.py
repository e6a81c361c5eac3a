"""Expert rules that turn measurements into findings (``kernelscope.models.Finding``).

One module per family; each rule is a small function declared once with :func:`registry.rule`: its
id, family, scope (the typed input it reads), named thresholds (defaults stated, overridable) and the
context keys it reads; its text carries the numbers. ``run_rules(scope, data)`` runs every rule of a
scope and ranks the findings. ``docs/rules.md`` is generated from the registry by
``python -m kernelscope.heuristics.reference``.
"""

from kernelscope.heuristics import (  # the rule modules register their rules on import
    atomics,
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
from kernelscope.heuristics.registry import (
    REGISTRY,
    SCOPES,
    Rule,
    Run,
    UnknownThreshold,
    check_overrides,
    check_registry,
    merge,
    rank,
    rule,
    run_rules,
)

RULE_MODULES = (atomics, compute, control, instructions, latency, launch, memory, occupancy, resources, stalls,
                system)
stalls.link_stall_causes()  # once every rule is registered: the stall reasons each rule's finding explains


def load_all() -> None:
    """Every rule module is imported with the package; this checks the complete registry (kept for callers)."""
    check_registry()


check_registry()

__all__ = ["REGISTRY", "RULE_MODULES", "SCOPES", "Rule", "Run", "UnknownThreshold", "check_overrides", "load_all",
           "merge", "rank", "rule", "run_rules"]
