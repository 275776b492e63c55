"""One definition of each record layout and enum: the C lists (bpf/ipctrace.h's
IPT_REC_TYPES and IPT_FUNC_IDS, timeline.c's IPT_STATES and IPT_STEP_TYPES) are the
source; analysis/store/records.py names them for the analysis, and must say the same."""

import ctypes
import re

import numpy as np
import pytest

from analysis import OUTPUT
from analysis.errors import UsageError
from analysis.model import breakdown as bd
from analysis.model import timeline
from analysis.store import clib, events, records, syscalls
from conftest import HOME


def test_python_names_are_the_built_librarys():
    assert clib.c_tables() == records.TABLES


def test_every_table_is_checked():
    """ipt_name has exactly the tables records.TABLES lays out: a fifth is None."""
    lib = ctypes.CDLL(str(OUTPUT / "libipctrace-analysis.so"))
    lib.ipt_name.restype, lib.ipt_name.argtypes = ctypes.c_char_p, [ctypes.c_int, ctypes.c_int]
    assert lib.ipt_name(len(records.TABLES), 0) is None and lib.ipt_name(-1, 0) is None
    assert all(lib.ipt_name(t, len(names)) is None for t, names in enumerate(records.TABLES))


def test_a_library_of_other_definitions_is_refused(monkeypatch):
    """A library built from a header whose lists differ from records.py is a usage error."""
    monkeypatch.setattr(clib, "_lib", None)
    monkeypatch.setattr(records, "TABLES", (records.TYPES + ("new_type",), *records.TABLES[1:]))
    with pytest.raises(UsageError, match="other record types or states"):
        clib.library()
    monkeypatch.undo()
    clib._lib = None
    clib.library()


def test_the_analysis_uses_the_one_definition():
    assert timeline.STATE_NAMES == records.STATES and timeline.Events.TYPES == records.TYPES
    assert set(bd.COMPONENTS) == set(records.STATES)
    assert [records.FUNCS[i - 1] for i in records.COPY_FUNC_IDS] == [
        "copy_to_iter",
        "copy_from_iter",
        "copy_page_to_iter",
        "copy_page_from_iter",
    ]


def test_the_decoder_counts_what_the_lists_do_not_name():
    """Record type codes 1..len(TYPES) decode to TYPES' order; 0 and len(TYPES) + 1 are unknown."""
    rec = np.zeros(4, events.REC)
    rec["type"] = [records.TYPES.index("switch") + 1, records.TYPES.index("steal") + 1, 0, len(records.TYPES) + 1]
    rec["ts"] = [1, 2, 3, 4]
    none = np.zeros(0, np.int64)
    cols, unknown = clib.decode(rec, None, none, none, np.zeros(0, np.int32), none)
    assert unknown == 2
    assert [records.TYPES[c] for c in cols["type"][:2]] == ["switch", "steal"]


def test_the_header_has_no_second_list():
    """The record types and function ids are written once, in the X-macro lists."""
    header = (HOME / "bpf" / "ipctrace.h").read_text()
    assert "REC_SYS_ENTER = 1," not in header and header.count("#define IPT_REC_TYPES(X)") == 1
    for path in (
        "loaders/loader.c",
        "loaders/steal.c",
        "bpf/trace.bpf.c",
        "loaders/probes.c",
        "analysis/store/decode.c",
        "analysis/model/timeline.c",
    ):
        text = (HOME / path).read_text()
        # the loader's check of paired tracepoints names probes, some of which share a record
        # type's name: that table is no list of record types
        text = re.sub(r"\} paired\[\] = \{.*?\n\};", "", text, flags=re.S)
        assert re.findall(r"#define MAX_CPUS\s+(\S+)", text) in ([], ["IPT_MAX_CPUS"]), path
        assert not any(
            w in text for w in ('"sys_enter", "sys_exit"', '= "sys_enter"', "{ SIZE_NONE,", "WAKE_IN_HARDIRQ (")
        ), path


@pytest.mark.parametrize(
    "arch, nr, name",
    [
        # worked out from the kernel's tables (arch/x86/entry/syscalls/syscall_64.tbl,
        # include/uapi/asm-generic/unistd.h)
        ("x86_64", 0, "read"),
        ("x86_64", 1, "write"),
        ("x86_64", 110, "getppid"),
        ("x86_64", 202, "futex"),
        ("x86_64", 243, "mq_timedreceive"),
        ("x86_64", 435, "clone3"),
        ("aarch64", 63, "read"),
        ("aarch64", 64, "write"),
        ("aarch64", 98, "futex"),
        ("aarch64", 25, "fcntl"),
        ("aarch64", 173, "getppid"),
        ("aarch64", 206, "sendto"),
        ("aarch64", 79, "newfstatat"),
        ("riscv64", 1, "write"),  # an architecture without a table of its own: x86_64's
    ],
)
def test_one_syscall_table_per_architecture(arch, nr, name):
    assert syscalls.name(arch, nr) == name


def test_unknown_syscall_numbers_say_so():
    assert syscalls.name("x86_64", 100_000) == "syscall 100000"
    assert syscalls.numbers("aarch64", ("read", "write")) == {63: "read", 64: "write"}
    assert syscalls.numbers("x86_64", timeline.DATA_SYSCALLS)[0] == "read" and len(timeline.DATA_SYSCALLS) == 13
