"""CUTLASS/CuTe sources: search hits and file reads."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

CutlassHitKind = Literal["class", "struct", "union", "enum", "alias", "typedef", "macro", "function", "text"]



class CutlassHit(BaseModel):
    path: str = Field(description="Relative to the CUTLASS root; give it to read_cutlass_file.")
    line: int
    kind: CutlassHitKind = Field(description="A definition's kind, or text for a plain match.")
    symbol: str | None = Field(None, description="The defined name (definitions only).")
    snippet: str = Field(description="The line, trimmed (at most 200 characters).")


class CutlassSearchResult(BaseModel):
    query: str
    root: str
    version: str | None = None
    hits: list[CutlassHit] = Field(default_factory=list, description="Best first: definitions, then text matches.")
    definitions: int = Field(0, description="Definitions matching (all of them, not only those shown).")
    text_matches: int = Field(0, description="Lines matching, counted up to text_matches_capped.")
    text_matches_capped: bool = Field(False, description="Counting stopped; there are more.")
    truncated: bool = Field(False, description="More hits than `limit`: narrow the query or raise the limit.")
    searched_files: int = 0
    index_built: bool = Field(False, description="This call built the index (first use of this CUTLASS root).")
    index_build_s: float | None = None
    query_ms: float = 0.0


class CutlassFileResult(BaseModel):
    path: str = Field(description="Relative to the CUTLASS root.")
    root: str
    version: str | None = None
    start_line: int
    end_line: int = Field(description="Last line returned (inclusive).")
    total_lines: int
    text: str = Field(description="The lines start_line..end_line, without line numbers.")
    truncated: bool = Field(False, description="The range was cut at max_lines; continue at next_start_line.")
    next_start_line: int | None = None
