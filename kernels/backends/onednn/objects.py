"""oneDNN's objects as small Python owners: the engine and stream, memory descriptors, memory (a
buffer the library allocates, seen from numpy), primitive descriptors (and the iterator over their
implementations), primitives and reorders. Each frees its handle when collected, so that a kernel's
buffers go with its parts.

Buffers are allocated by the library (DNNL_MEMORY_ALLOCATE) rather than handed numpy's: an engine of
the SYCL CPU runtime expects its own (USM) allocations, and a CPU device's are host memory, which
numpy reads and writes in place (`Memory.array`)."""

from __future__ import annotations

import ctypes
from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np

from . import constants as C
from .binding import ExecArg, check, dims, text

# numpy's view of each oneDNN data type (bf16 as its bits: numpy has no bfloat16; bf16.py converts)
NUMPY_TYPES = {
    C.F32: np.float32,
    C.F16: np.float16,
    C.BF16: np.uint16,
    C.S32: np.int32,
    C.S8: np.int8,
    C.U8: np.uint8,
}


class Engine:
    """The CPU engine and an in-order stream on it."""

    def __init__(self, lib: Any) -> None:
        self.lib = lib
        self.handle = ctypes.c_void_p()
        check(lib, lib.dnnl_engine_create(ctypes.byref(self.handle), C.ENGINE_CPU, 0), "dnnl_engine_create(cpu, 0)")
        self.stream = ctypes.c_void_p()
        status = lib.dnnl_stream_create(ctypes.byref(self.stream), self.handle, C.STREAM_DEFAULT_FLAGS)
        check(lib, status, "dnnl_stream_create")

    def wait(self) -> None:
        check(self.lib, self.lib.dnnl_stream_wait(self.stream), "dnnl_stream_wait")


class MemoryDesc:
    """A memory descriptor this process created (owned: destroyed with it)."""

    def __init__(self, lib: Any, shape: tuple[int, ...], data_type: int, tag: int) -> None:
        self.lib = lib
        self.handle = ctypes.c_void_p()
        status = lib.dnnl_memory_desc_create_with_tag(
            ctypes.byref(self.handle), len(shape), dims(shape), data_type, tag
        )
        check(lib, status, f"dnnl_memory_desc_create_with_tag({shape}, {text(lib.dnnl_dt2str(data_type))})")

    def __del__(self) -> None:
        _destroy(self, "dnnl_memory_desc_destroy")


def _destroy(owner: Any, function: str) -> None:
    """Free an owner's handle (once; quietly at interpreter exit, when the library may be gone)."""
    handle = getattr(owner, "handle", None)
    if handle:
        try:
            getattr(owner.lib, function)(handle)
        except Exception:  # noqa: BLE001 - a destructor must not raise; at exit the library may be unloaded
            pass
        owner.handle = None


def md_size(lib: Any, md: Any) -> int:
    return int(lib.dnnl_memory_desc_get_size(md))


def md_dims(lib: Any, md: Any) -> tuple[int, ...]:
    ndims = ctypes.c_int()
    check(lib, lib.dnnl_memory_desc_query(md, C.QUERY_NDIMS_S32, ctypes.byref(ndims)), "dnnl_memory_desc_query(ndims)")
    pointer = ctypes.POINTER(ctypes.c_int64)()
    check(lib, lib.dnnl_memory_desc_query(md, C.QUERY_DIMS, ctypes.byref(pointer)), "dnnl_memory_desc_query(dims)")
    return tuple(int(pointer[i]) for i in range(ndims.value))


def md_query_int(lib: Any, md: Any, what: int) -> int:
    value = ctypes.c_int()
    check(lib, lib.dnnl_memory_desc_query(md, what, ctypes.byref(value)), f"dnnl_memory_desc_query({what})")
    return value.value


def md_format(lib: Any, md: Any) -> str:
    """The layout as oneDNN's verbose mode names it: the dimensions as letters (a, b, c ... in
    logical order) from the outermost stride to the innermost, blocked ones in capitals, then the
    blocks ('aBcd16b': nChw16c; 'ABcd16b16a': OIhw16i16o). Layouts a primitive keeps to itself (an
    RNN's packed weights) are 'opaque'."""
    kind = md_query_int(lib, md, C.QUERY_FORMAT_KIND)
    if kind != C.FORMAT_KIND_BLOCKED:
        return {C.FORMAT_KIND_ANY: "any", C.FORMAT_KIND_OPAQUE: "opaque"}.get(kind, f"format_kind {kind}")
    ndims = len(md_dims(lib, md))
    strides = _md_array(lib, md, C.QUERY_STRIDES, ndims)
    nblks = md_query_int(lib, md, C.QUERY_INNER_NBLKS_S32)
    blocks = _md_array(lib, md, C.QUERY_INNER_BLKS, nblks)
    idxs = _md_array(lib, md, C.QUERY_INNER_IDXS, nblks)
    letters = "abcdefghijkl"
    blocked = set(idxs)
    order = sorted(range(ndims), key=lambda d: (-strides[d], d))
    outer = "".join(letters[d].upper() if d in blocked else letters[d] for d in order)
    return outer + "".join(f"{b}{letters[i]}" for b, i in zip(blocks, idxs, strict=True))


def _md_array(lib: Any, md: Any, what: int, count: int) -> list[int]:
    if count == 0:
        return []
    pointer = ctypes.POINTER(ctypes.c_int64)()
    check(lib, lib.dnnl_memory_desc_query(md, what, ctypes.byref(pointer)), f"dnnl_memory_desc_query({what})")
    return [int(pointer[i]) for i in range(count)]


class Memory:
    """A buffer of `md`'s layout allocated by the library, with numpy's view of its bytes."""

    def __init__(self, engine: Engine, md: Any, data_type: int) -> None:
        self.lib, self.engine = engine.lib, engine
        self.handle = ctypes.c_void_p()
        allocate = ctypes.c_void_p(C.MEMORY_ALLOCATE)
        check(
            self.lib,
            self.lib.dnnl_memory_create(ctypes.byref(self.handle), md, engine.handle, allocate),
            "dnnl_memory_create",
        )
        self.size = md_size(self.lib, md)
        self.data_type = data_type
        pointer = ctypes.c_void_p()
        check(
            self.lib,
            self.lib.dnnl_memory_get_data_handle(self.handle, ctypes.byref(pointer)),
            "dnnl_memory_get_data_handle",
        )
        self.pointer = pointer.value or 0

    def array(self, shape: tuple[int, ...] | None = None) -> np.ndarray:
        """The buffer as a numpy array of its data type (flat, or `shape` for a plain row-major layout)."""
        dtype = np.dtype(NUMPY_TYPES[self.data_type])
        count = self.size // dtype.itemsize
        raw = (ctypes.c_char * self.size).from_address(self.pointer)
        flat = np.frombuffer(memoryview(raw).cast("B"), dtype=dtype, count=count)
        return flat.reshape(shape) if shape is not None else flat

    def __del__(self) -> None:
        _destroy(self, "dnnl_memory_destroy")


class Attr:
    """Primitive attributes: the scratchpad handed in by the caller (so that no call allocates one),
    fp32 kept strict (no down-conversion to bf16 or tf32, whatever ONEDNN_DEFAULT_FPMATH_MODE says),
    and, for int8, the scales of named arguments."""

    def __init__(self, lib: Any, scales: tuple[int, ...] = ()) -> None:
        self.lib = lib
        self.handle = ctypes.c_void_p()
        check(lib, lib.dnnl_primitive_attr_create(ctypes.byref(self.handle)), "dnnl_primitive_attr_create")
        check(lib, lib.dnnl_primitive_attr_set_scratchpad_mode(self.handle, C.SCRATCHPAD_MODE_USER), "scratchpad_mode")
        check(lib, lib.dnnl_primitive_attr_set_fpmath_mode(self.handle, C.FPMATH_MODE_STRICT), "fpmath_mode")
        for arg in scales:  # one scale for the whole tensor (mask 0)
            check(
                lib, lib.dnnl_primitive_attr_set_scales_mask(self.handle, arg, 0), "dnnl_primitive_attr_set_scales_mask"
            )

    def __del__(self) -> None:
        _destroy(self, "dnnl_primitive_attr_destroy")


class PrimitiveDesc:
    """A primitive descriptor (owned), at one of the implementations oneDNN offers for its problem."""

    def __init__(self, lib: Any, handle: ctypes.c_void_p, hint: PrimitiveDesc | None = None) -> None:
        self.lib, self.handle = lib, handle
        # A backward descriptor's forward hint: oneDNN keeps a pointer to it, so it must outlive this one.
        self.hint = hint

    @property
    def impl(self) -> str:
        """oneDNN's name of the implementation (dnnl_query_impl_info_str): e.g. 'brgconv:avx512_core_amx'."""
        name = ctypes.c_char_p()
        check(
            self.lib,
            self.lib.dnnl_primitive_desc_query(self.handle, C.QUERY_IMPL_INFO_STR, 0, ctypes.byref(name)),
            "impl_info_str",
        )
        return text(name.value)

    def md(self, what: int, index: int = 0) -> Any:
        """A memory descriptor the primitive chose (owned by this descriptor)."""
        return self.lib.dnnl_primitive_desc_query_md(self.handle, what, index)

    def clone(self) -> PrimitiveDesc:
        copy = ctypes.c_void_p()
        check(
            self.lib, self.lib.dnnl_primitive_desc_clone(ctypes.byref(copy), self.handle), "dnnl_primitive_desc_clone"
        )
        return PrimitiveDesc(self.lib, copy, self.hint)

    def implementations(self) -> Iterator[PrimitiveDesc]:
        """Every implementation oneDNN offers for the problem, in its order of preference (the first is
        the one a plain primitive descriptor picks), each a descriptor of its own
        (dnnl_primitive_desc_next_impl)."""
        yield self.clone()
        while True:
            status = self.lib.dnnl_primitive_desc_next_impl(self.handle)
            if status == C.LAST_IMPL_REACHED:
                return
            check(self.lib, status, "dnnl_primitive_desc_next_impl")
            yield self.clone()

    def __del__(self) -> None:
        _destroy(self, "dnnl_primitive_desc_destroy")


def first_offered(pd: PrimitiveDesc) -> tuple[PrimitiveDesc, list[dict[str, Any]]]:
    """(oneDNN's first implementation of a fresh descriptor's problem, every implementation it offers by name and
    rank): a clone does not iterate, so the list is read from the descriptor as created."""
    offered = list(pd.implementations())
    return offered[0], [{"candidate": impl.impl, "rank": rank} for rank, impl in enumerate(offered)]


def created_pd(lib: Any, what: str, create: Any, *args: Any) -> PrimitiveDesc:
    """A primitive descriptor from its `create` function (DnnlError, with `what`, where it fails)."""
    handle = ctypes.c_void_p()
    check(lib, create(ctypes.byref(handle), *args), what)
    return PrimitiveDesc(lib, handle)


class Primitive:
    """A primitive and the arguments it runs on, packed once: `run` is one execution and the wait
    for it, nothing else (the timed call)."""

    def __init__(self, engine: Engine, pd: PrimitiveDesc, args: Mapping[int, Memory]) -> None:
        self.lib, self.engine, self.pd = engine.lib, engine, pd
        self.handle = ctypes.c_void_p()
        check(
            self.lib,
            self.lib.dnnl_primitive_create(ctypes.byref(self.handle), pd.handle),
            f"dnnl_primitive_create({pd.impl})",
        )
        self.memories = dict(args)  # kept alive while the primitive may run on them
        self.scratchpad = scratchpad(engine, pd)
        if self.scratchpad is not None:
            self.memories[C.ARG_SCRATCHPAD] = self.scratchpad
        self.args = (ExecArg * len(self.memories))(*(ExecArg(a, m.handle) for a, m in self.memories.items()))
        self.nargs = len(self.memories)

    def run(self) -> None:
        lib = self.lib
        check(
            lib,
            lib.dnnl_primitive_execute(self.handle, self.engine.stream, self.nargs, self.args),
            "dnnl_primitive_execute",
        )
        check(lib, lib.dnnl_stream_wait(self.engine.stream), "dnnl_stream_wait")

    def __del__(self) -> None:
        _destroy(self, "dnnl_primitive_destroy")


def scratchpad(engine: Engine, pd: PrimitiveDesc) -> Memory | None:
    """The scratchpad a primitive of `pd` needs (attributes ask for it to be the caller's), or None."""
    md = pd.md(C.QUERY_SCRATCHPAD_MD)
    return Memory(engine, md, C.U8) if md and md_size(engine.lib, md) else None


def reorder(engine: Engine, source: Memory, source_md: Any, target: Memory, target_md: Any) -> None:
    """Copy `source` into `target`, converting layout (and type), with oneDNN's reorder: how a user's
    NCHW tensor reaches the layout a primitive chose, and comes back; never inside a timed call."""
    lib = engine.lib
    attr = Attr(lib)
    pd = created_pd(
        lib,
        "dnnl_reorder_primitive_desc_create",
        lib.dnnl_reorder_primitive_desc_create,
        source_md,
        engine.handle,
        target_md,
        engine.handle,
        attr.handle,
    )
    Primitive(engine, pd, {C.ARG_SRC: source, C.ARG_DST: target}).run()
