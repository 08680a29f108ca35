"""Memory per record in flight, as the release build lays it out: the async frames a record holds for its
whole round trip to APNs stay small.

Swift allocates an async function's frame whole when the function starts, sized for every local of
everything the optimizer inlined into it, and a record keeps `Pipeline.process`'s and
`APNsPushTransport.deliverAll`'s frames until APNs has answered. Synchronous helpers inlined into them
once took the two from 480 + 304 to 816 + 1,312 bytes: about 10 MB more peak RSS at 8,000 records in
flight (`bench pipeline --apns-latency-ms 300`), and frames past the task allocator's first slab cost a
malloc per record. The helpers are `@inline(never)` since; this reads the frame sizes from the binary, so
that no refactor brings the growth back unnoticed.

Each async function has an "async function pointer" (its mangled name + `Tu`): a 32-bit relative offset
to the code, then the 32-bit size of the frame the caller allocates for it.
"""
import os
import re
import shutil
import struct
import subprocess

BIN = os.environ.get("APNS_WORKER_BIN", "apns-worker")

# Swift 6.3's task allocator keeps its first slab in the task itself: 984 bytes (swift::StackAllocator<984,
# ...>). The two frames fit in it together, with room for what they call.
FIRST_SLAB_BYTES = 984
FRAMES = {
    "Pipeline.process": re.compile(r"^\$s6Worker8PipelineC7process_10generation10withdrawaly.*YaFTu$"),
    # deliverAll(_:withdrawal:), which the pipeline calls (deliverAll(_:) only forwards to it).
    "APNsPushTransport.deliverAll": re.compile(r"^\$s6Worker17APNsPushTransportC10deliverAll_10withdrawal.*YaFTu$"),
}


def async_frame_sizes(path, patterns):
    """The frame size in each async function pointer whose symbol matches one of `patterns` (label → regex),
    read from the ELF64 little-endian file's symbol table."""
    data = open(path, "rb").read()
    assert data[:4] == b"\x7fELF" and data[4] == 2 and data[5] == 1, f"{path} is not a little-endian ELF64 file"
    section_offset, = struct.unpack_from("<Q", data, 0x28)
    entry_size, count = struct.unpack_from("<HH", data, 0x3A)
    sections = [struct.unpack_from("<IIQQQQIIQQ", data, section_offset + i * entry_size) for i in range(count)]
    symtab = next((s for s in sections if s[1] == 2), None)  # SHT_SYMTAB
    assert symtab is not None, f"{path} has no symbol table (stripped?)"
    strings = sections[symtab[6]][4]
    sizes = {}
    for i in range(symtab[5] // 24):
        name_offset, _, _, _, value, _ = struct.unpack_from("<IBBHQQ", data, symtab[4] + i * 24)
        start = strings + name_offset
        if data[start:start + 9] != b"$s6Worker":
            continue
        name = data[start:data.index(b"\0", start)].decode("utf-8", "replace")
        for label, pattern in patterns.items():
            if not pattern.match(name):
                continue
            # The section holding the address gives its place in the file (not SHT_NOBITS, 8).
            offset = next(o + value - a for _, kind, _, a, o, size, *_ in sections
                          if kind != 8 and a <= value < a + size)
            _, sizes[label] = struct.unpack_from("<iI", data, offset)
    return sizes


def test_a_records_async_frames_fit_the_task_allocators_first_slab():
    path = shutil.which(BIN) or BIN
    assert os.path.exists(path), f"{BIN} not found"
    version = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=30)
    assert version.returncode == 0, version.stderr
    sizes = async_frame_sizes(path, FRAMES)
    assert set(sizes) == set(FRAMES), f"async function pointers not found for {set(FRAMES) - set(sizes)}"
    print(f"async frames: {sizes}")
    assert all(0 < size for size in sizes.values()), sizes
    assert sum(sizes.values()) <= FIRST_SLAB_BYTES, (
        f"{sizes}: a record holds these frames for its round trip to APNs; keep the synchronous work in "
        "helpers marked @inline(never) (Pipeline+Processing.swift, APNsPushTransport.swift)")
