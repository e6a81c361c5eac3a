"""ELF details of CUDA binaries that more than one layer needs."""

from __future__ import annotations

import struct


def restore_elf_size(data: bytes) -> bytes:
    """CuPy's ``getCUBIN`` drops the last byte, as if a cubin were NUL-terminated PTX text. A cubin
    ends with its program or section header table, whose last byte is a zero (the top byte of an
    alignment or entry size), so zero-padding to the size the ELF header declares restores it exactly
    (the driver loads CuPy's own short cubins; nvdisasm refuses them)."""
    if len(data) < 64 or data[:4] != b"\x7fELF" or data[4] != 2:
        return data
    phoff, shoff = struct.unpack_from("<QQ", data, 0x20)
    phentsize, phnum, shentsize, shnum = struct.unpack_from("<HHHH", data, 0x36)
    size = max(phoff + phentsize * phnum, shoff + shentsize * shnum)
    return data + b"\x00" * (size - len(data)) if 0 < size - len(data) <= 8 else data
