"""The symbols sampled stacks are named with: the kernel's (/proc/kallsyms) and those of the ELF
files a sampled process had mapped (its /proc/PID/maps as the sampler took it)."""

import bisect
import os
import struct

import numpy as np

from analysis.errors import UsageError
from analysis.store import safeio
from analysis.store.jsonfiles import Mapped

UNKNOWN_FRAME = "[unknown]"


class KernelSymbols:
    """/proc/kallsyms as sorted arrays; text symbols only."""

    def __init__(self, path: str = "/proc/kallsyms") -> None:
        addrs, names = [], []
        try:
            with open(path) as f:
                for line in f:
                    parts = line.split()
                    if len(parts) >= 3 and parts[1] in "tTwW":
                        addrs.append(int(parts[0], 16))
                        names.append(parts[2])
        except OSError as e:
            raise UsageError(f"cannot read {path}: {e.strerror}") from None
        order = np.argsort(np.array(addrs, dtype=np.uint64), kind="stable")
        self.addrs = np.array(addrs, dtype=np.uint64)[order]
        self.names = [names[i] for i in order]
        if len(self.addrs) and not self.addrs.any():
            raise UsageError(f"{path} shows only zero addresses (kptr_restrict); run as root")

    def name(self, addr: int) -> str:
        i = int(np.searchsorted(self.addrs, np.uint64(addr), side="right")) - 1
        return self.names[i] if i >= 0 else UNKNOWN_FRAME


class ElfSymbols:
    """Function symbols of one ELF file (.symtab, else .dynsym), found by file offset."""

    def __init__(self, path: str) -> None:
        self.loads: list[tuple[int, int, int]] = []
        self.starts = np.zeros(0, np.uint64)
        self.names: list[str] = []
        data = safeio.read_named_file(path)
        if not data or data[:4] != b"\x7fELF" or len(data) < 64 or data[4] != 2:  # 64-bit only, as the kernel
            return
        try:
            self._read(data)
        except (struct.error, IndexError, ValueError, UnicodeDecodeError):
            # not an ELF file we understand (cut short, damaged): its frames stay unnamed
            self.loads, self.starts, self.names = [], np.zeros(0, np.uint64), []

    def _read(self, data: bytes) -> None:
        starts, names = [], []
        (phoff, shoff) = struct.unpack_from("<QQ", data, 0x20)
        (phentsize, phnum, shentsize, shnum) = struct.unpack_from("<HHHH", data, 0x36)
        for i in range(phnum):
            p_type, _, p_offset, p_vaddr, _, p_filesz = struct.unpack_from("<IIQQQQ", data, phoff + i * phentsize)
            if p_type == 1:  # PT_LOAD
                self.loads.append((p_offset, p_vaddr, p_filesz))
        sections = [struct.unpack_from("<IIQQQQIIQQ", data, shoff + i * shentsize) for i in range(shnum)]
        for wanted in (2, 11):  # SHT_SYMTAB, then SHT_DYNSYM
            for sh in sections:
                if sh[1] != wanted:
                    continue
                strtab = sections[sh[6]]
                for off in range(sh[4], sh[4] + sh[5], 24):
                    st_name, st_info, _, st_shndx, st_value, st_size = struct.unpack_from("<IBBHQQ", data, off)
                    if st_info & 0xF == 2 and st_shndx != 0 and st_value:  # STT_FUNC, defined
                        end = data.index(b"\0", strtab[4] + st_name)
                        starts.append(st_value)
                        names.append(data[strtab[4] + st_name : end].decode(errors="replace"))
            if starts:
                break
        order = np.argsort(np.array(starts, dtype=np.uint64), kind="stable")
        self.starts = np.array(starts, dtype=np.uint64)[order]
        self.names = [names[i] for i in order]

    def name(self, file_offset: int) -> str | None:
        for p_offset, p_vaddr, p_filesz in self.loads:
            if p_offset <= file_offset < p_offset + p_filesz:
                vaddr = file_offset - p_offset + p_vaddr
                i = int(np.searchsorted(self.starts, np.uint64(vaddr), side="right")) - 1
                return self.names[i] if i >= 0 else None
        return None


class UserSymbols:
    """Resolves (pid, address) with the /proc/PID/maps snapshot the sampler took."""

    def __init__(self, maps: dict[int, list[Mapped]]):
        self.maps = {pid: sorted((m.start, m.end, m.offset, m.path) for m in entries) for pid, entries in maps.items()}
        self.elves: dict[str, ElfSymbols] = {}

    def name(self, pid: int, addr: int) -> str:
        entries = self.maps.get(int(pid))
        if not entries:
            return UNKNOWN_FRAME
        i = bisect.bisect_right(entries, (addr, float("inf"))) - 1
        if i < 0 or not entries[i][0] <= addr < entries[i][1]:
            return UNKNOWN_FRAME
        start, _, offset, path = entries[i]
        if not path.startswith("/"):
            return f"[{path.strip('[]') or 'anon'}]"
        if path not in self.elves:
            self.elves[path] = ElfSymbols(path)
        sym = self.elves[path].name(addr - start + offset)
        return sym or f"[{os.path.basename(path)}]"
