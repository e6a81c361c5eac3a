"""Search over candidate kernels: the tree, the strategies (MCTS and the baselines it is compared
with), rewards, the search memory, and knob spaces for the offline proposer.

Pure Python over small dataclasses: nothing here talks to the server. The optimize loop (to come)
feeds it evaluations that it gets over MCP.
"""

from kernelscope.agent.search.knobs import Knob, KnobExpander, apply_knobs, neighbours, parse_knobs
from kernelscope.agent.search.reward import Outcome, reward
from kernelscope.agent.search.strategies import (
    MCTS,
    Beam,
    Greedy,
    Pending,
    RandomSearch,
    SearchState,
    Strategy,
    run_search,
)
from kernelscope.agent.search.tree import Node, SearchMemory

__all__ = ["MCTS", "Beam", "Greedy", "Knob", "KnobExpander", "Node", "Outcome", "Pending", "RandomSearch",
           "SearchMemory", "SearchState", "Strategy", "apply_knobs", "neighbours", "parse_knobs", "reward",
           "run_search"]
