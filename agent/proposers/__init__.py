"""Proposers: what writes the search's next candidate. The offline knob proposer moves the knobs a
candidate declares (``agent.search.knobs``); the LLM proposer asks a model (Anthropic, or an
OpenAI-compatible endpoint) to rewrite the current candidate from its profile findings.

``factory`` chooses one for a run; ``llm`` is the LLM expander, ``clients`` the two SDK clients,
``prompts`` what the model is sent and how its reply is read, ``pricing`` the cost estimate.
"""

from kernelscope.agent.proposers.clients import (
    TOOL_BUDGET_SPENT,
    AnthropicClient,
    LLMClient,
    OpenAIClient,
    ToolCaller,
    ToolSpec,
)
from kernelscope.agent.proposers.factory import Proposer, make_expander, model_name, resolve_proposer
from kernelscope.agent.proposers.llm import LLMExpander
from kernelscope.agent.proposers.pricing import PRICES_PER_MTOK, llm_cost_usd
from kernelscope.agent.proposers.prompts import SYSTEM, TOOLS_NOTE, build_prompt, extract_code, rationale

__all__ = ["PRICES_PER_MTOK", "SYSTEM", "TOOLS_NOTE", "TOOL_BUDGET_SPENT", "AnthropicClient", "LLMClient",
           "LLMExpander", "OpenAIClient", "Proposer", "ToolCaller", "ToolSpec", "build_prompt", "extract_code",
           "llm_cost_usd", "make_expander", "model_name", "rationale", "resolve_proposer"]
