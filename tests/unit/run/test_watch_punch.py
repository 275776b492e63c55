"""The live events file handed back as it is read (run/watch.hand_back): only whole 1 MiB
blocks of the file, at offsets that are multiples of 1 MiB, so that no file system block is
left half punched (zeroed and kept). Spans counted from the header's end kept a 4 KiB block of
every MiB."""

import os

import pytest

from analysis.run.watch import PUNCH_BYTES, aligned_span, hand_back

MIB = 1 << 20


@pytest.mark.parametrize(
    "start, end, span",
    [
        (64, 64 + 3 * MIB, (MIB, 3 * MIB)),  # from the header's end: its MiB stays
        (MIB, 5 * MIB + 17, (MIB, 5 * MIB)),  # a record cut at the end: up to the MiB before it
        (MIB, 2 * MIB - 1, (MIB, MIB)),  # less than a MiB: nothing
        (3 * MIB, 3 * MIB, (3 * MIB, 3 * MIB)),
    ],
)
def test_aligned_span(start, end, span):
    assert aligned_span(start, end) == span


def allocated(path):
    return os.stat(path).st_blocks * 512


def test_the_file_keeps_only_its_first_mib_and_what_is_unread(tmp_path):
    path = tmp_path / "events.bin"
    size = 64 + 8 * MIB
    path.write_bytes(os.urandom(size))
    if allocated(path) < size:
        pytest.skip("this file system allocates lazily")
    at = 64
    # the steps' ends, as a watch reads: records of 32 B, not at MiB boundaries
    for end in (64 + 300_032, 64 + 1_300_000, 64 + 3 * MIB + 96, 64 + 5 * MIB + 4000, size):
        at = hand_back(path, at, end)
    if at == 64:
        pytest.skip("this file system cannot punch holes")
    assert at == 8 * MIB
    # the header's MiB and the 64 B after the last whole MiB: two blocks' worth of pages at most
    # beyond them would be one half-punched block; there are none
    assert allocated(path) == MIB + 4096, allocated(path)
    with open(path, "rb") as f:
        f.seek(MIB)
        assert f.read(PUNCH_BYTES) == bytes(PUNCH_BYTES)  # punched: reads as zeros
