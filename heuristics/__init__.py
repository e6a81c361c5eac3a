"""Expert rules that turn measurements into findings (``kernelscope.models.Finding``).

One module per family; each rule is a small function registered with :func:`registry.rule`, with
its id, family, the inputs it needs, named thresholds (defaults stated, overridable) and text that
carries the numbers. ``run_rules(scope, data)`` runs every rule of a scope and ranks the findings.
"""

from kernelscope.heuristics.registry import REGISTRY, Rule, rank, rule, run_rules

__all__ = ["REGISTRY", "Rule", "rank", "rule", "run_rules"]
