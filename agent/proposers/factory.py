"""Choosing the proposer of a run: the offline knob proposer (``search.KnobExpander`` over the knobs a
candidate declares) or an LLM (Anthropic, or an OpenAI-compatible endpoint), with its starting candidate."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from kernelscope.agent.config import OptimizeConfig
from kernelscope.agent.problems import reference_as_candidate
from kernelscope.agent.proposers.clients import AnthropicClient, LLMClient, OpenAIClient
from kernelscope.agent.proposers.llm import LLMExpander
from kernelscope.agent.search import KnobExpander, parse_knobs
from kernelscope.agent.search.knobs import apply_knobs, default_config
from kernelscope.agent.search.strategies import Candidate

ANTHROPIC_DEFAULT_MODEL = "claude-sonnet-4-5"


def resolve_proposer(cfg: OptimizeConfig) -> str:
    """The proposer asked for; for ``auto``: anthropic if its key is set, else openai if its key is, else
    offline."""
    if cfg.proposer != "auto":
        return cfg.proposer
    if os.environ.get("ANTHROPIC_API_KEY"):
        return "anthropic"
    if os.environ.get("OPENAI_API_KEY"):
        return "openai"
    return "offline"


def model_name(cfg: OptimizeConfig, proposer: str) -> str | None:
    """The LLM model a proposer uses (the Anthropic default where none is named)."""
    return (cfg.model or ANTHROPIC_DEFAULT_MODEL) if proposer == "anthropic" else cfg.model


def _offline(cfg: OptimizeConfig, template: str | None) -> KnobExpander:
    if template is None:
        raise ValueError("the offline proposer tunes the knobs a candidate declares: give a knob-annotated "
                         "candidate (or set an LLM key / --proposer to let a model write one)")
    knobs = parse_knobs(template)
    if not knobs:
        raise ValueError(f"{cfg.candidate} declares no knobs (lines like `// @knob BLOCK 64 128 256`): the "
                         "offline proposer has nothing to tune; annotate it or use an LLM proposer")
    return KnobExpander(knobs)


def _llm_client(cfg: OptimizeConfig, name: str) -> LLMClient:
    if name == "anthropic":
        return AnthropicClient(model=model_name(cfg, name) or ANTHROPIC_DEFAULT_MODEL, base_url=cfg.base_url)
    if not cfg.model:
        raise ValueError("the openai proposer needs --model (the endpoint's model name)")
    return OpenAIClient(model=cfg.model, base_url=cfg.base_url)


def make_expander(cfg: OptimizeConfig, template: str | None, reference: str) -> tuple[Any, Candidate, str]:
    """The proposer (as a search expander), its starting candidate, and the name actually used."""
    name = resolve_proposer(cfg)
    if name == "offline":
        exp = _offline(cfg, template)
        return exp, exp.start(), name
    llm = LLMExpander(_llm_client(cfg, name), reference)
    if template is None:
        cand = llm.start(reference_as_candidate(reference))
        return llm, Candidate(cand.key, {**cand.payload, "reference_start": "1"}, "start: the reference"), name
    knobs = parse_knobs(template)
    start = apply_knobs(template, default_config(knobs)) if knobs else template
    return llm, llm.start(start), name


@dataclass
class Proposer:
    """A run's proposer: its expander, starting candidate and name, and the source of any payload it made
    (an LLM's payload holds its source; a knob configuration is applied to the template)."""

    name: str
    expander: Any  # KnobExpander | LLMExpander
    start: Candidate
    template: str | None

    @classmethod
    def for_run(cls, cfg: OptimizeConfig, template: str | None, reference: str) -> Proposer:
        expander, start, name = make_expander(cfg, template, reference)
        return cls(name, expander, start, template)

    @property
    def offline(self) -> bool:
        return self.name == "offline"

    def source_of(self, payload: dict[str, str]) -> str:
        return payload["source"] if "source" in payload else apply_knobs(self.template or "", payload)

    def key_of(self, payload: dict[str, str]) -> str:
        return self.expander.key(payload["source"]) if "source" in payload else self.expander.key(payload)

    def can_repair(self) -> bool:
        return hasattr(self.expander, "repair")
