"""The tests' helper for overriding kernelscope's settings for a block (tests/_settings.py)."""

from __future__ import annotations

import pytest
from _settings import override_settings

from kernelscope.config import get_settings, settings_from_env


def test_the_changes_are_in_force_inside_and_gone_after() -> None:
    before = get_settings()
    with override_settings(max_binary_bytes=100, isolation="off") as s:
        assert get_settings() is s
        assert (s.max_binary_bytes, s.isolation, s.home) == (100, "off", before.home)
    assert get_settings() is before


def test_the_settings_come_back_when_the_block_raises() -> None:
    before = get_settings()
    with pytest.raises(RuntimeError, match="boom"), override_settings(max_binary_bytes=100):
        raise RuntimeError("boom")
    assert get_settings() is before


def test_nested_blocks_restore_one_level_each() -> None:
    before = get_settings()
    with override_settings(max_binary_bytes=100) as outer:
        with override_settings(isolation="off") as inner:
            assert (inner.max_binary_bytes, inner.isolation) == (100, "off")
            assert get_settings() is inner
        assert get_settings() is outer and outer.isolation == before.isolation
    assert get_settings() is before


def test_other_settings_can_be_the_base(tmp_path_factory: pytest.TempPathFactory) -> None:
    before = get_settings()
    base = settings_from_env(home=tmp_path_factory.mktemp("base"), roots=[str(tmp_path_factory.getbasetemp())])
    with override_settings(base, max_binary_bytes=100) as s:
        assert get_settings() is s and s.home == base.home and s.max_binary_bytes == 100
    with override_settings(base) as s:
        assert s == base
    assert get_settings() is before


def test_a_misspelt_setting_is_refused_and_nothing_changes() -> None:
    before = get_settings()
    with (pytest.raises(TypeError, match=r"not fields of Settings: max_binary_byte$"),
          override_settings(max_binary_byte=100)):
        pytest.fail("the block ran")
    assert get_settings() is before
