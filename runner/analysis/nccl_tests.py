"""nccl-tests' text output, read into typed rows: what the collectives are set beside.

nccl-tests (github.com/NVIDIA/nccl-tests) prints, per binary (all_reduce_perf, all_gather_perf, ...),
a header of `#` lines (its version, `# Collective test starting: NAME`, the run's parameters with
`graph: G`, one `#  Rank` line per GPU) and one line per size (src/util.cu writeBenchmarkLine*):

    size(B)  count(elements)  type  redop  root  | out of place: time(us) algbw busbw #wrong | in place: ...

`#wrong` is `N/A` where nccl-tests does not check (in-place all-to-all and send/recv). Times and
bandwidths are printed by getFloatStr: fixed decimals while they fit, else an exponent. Several
outputs may sit in one file (one binary after another): each `Collective test starting` opens a new
one. The per-iteration columns (-I 1) are not read: a line with more fields than the plain format
is refused with its line number, as is a line that is neither a comment nor a result."""

from __future__ import annotations

import re
from pathlib import Path

from pydantic import BaseModel, ConfigDict

# nccl-tests' binary -> the collective's operation name here (kernels/collective_kernels.py)
BINARIES = {
    "all_reduce_perf": "all_reduce",
    "all_gather_perf": "all_gather",
    "reduce_scatter_perf": "reduce_scatter",
    "broadcast_perf": "broadcast",
    "reduce_perf": "reduce",
    "alltoall_perf": "all_to_all",
    "sendrecv_perf": "sendrecv",
}
STARTING = re.compile(r"^#\s*Collective test starting:\s*(\S+)")
PARAMS = re.compile(r"^#\s*nThread\s+(\d+)\s+nGpus\s+(\d+).*?graph:\s*(\d+)")
VERSION = re.compile(r"^#\s*nccl-tests version\s+(\S+)\s+nccl-headers=(\d+)\s+nccl-library=(\d+)")
RANK = re.compile(r"^#\s+Rank\s+\d+\s")
PREAMBLE_FIELDS = 5  # size, count, type, redop, root
DIRECTION_FIELDS = 4  # time, algbw, busbw, #wrong
LINE_FIELDS = PREAMBLE_FIELDS + 2 * DIRECTION_FIELDS


class NcclTestsError(ValueError):
    """The file is not nccl-tests' output as this parser reads it (the message says where)."""


class Figures(BaseModel):
    """One direction of one size: time per call (us), algbw and busbw (GB/s), wrong elements
    (None where nccl-tests did not check)."""

    model_config = ConfigDict(frozen=True)
    time_us: float
    algbw_gbps: float
    busbw_gbps: float
    wrong: int | None


class Row(BaseModel):
    model_config = ConfigDict(frozen=True)
    bytes: int
    count: int
    type: str
    redop: str
    root: int
    out_of_place: Figures
    in_place: Figures


class Output(BaseModel):
    """One binary's output: which collective, on how many ranks, with graphs or not, its rows."""

    model_config = ConfigDict(frozen=True)
    binary: str
    op: str
    ranks: int
    graph: bool
    version: str = ""
    nccl: str = ""
    source: str = ""
    rows: tuple[Row, ...] = ()


def _number(text: str, where: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise NcclTestsError(f"{where}: '{text}' is not a number") from None


def _figures(fields: list[str], where: str) -> Figures:
    time_us, algbw, busbw, wrong = fields
    return Figures(
        time_us=_number(time_us, where),
        algbw_gbps=_number(algbw, where),
        busbw_gbps=_number(busbw, where),
        wrong=None if wrong == "N/A" else int(_number(wrong, where)),
    )


def _nccl_version(code: str) -> str:
    """NCCL's version code (22809) as 2.28.9 (NCCL_VERSION_CODE: major*10000 + minor*100 + patch)."""
    value = int(code)
    return f"{value // 10000}.{value // 100 % 100}.{value % 100}" if value >= 10000 else code


class _Reading:
    """One binary's output being read."""

    def __init__(self, binary: str, source: str) -> None:
        self.binary, self.source = binary, source
        self.threads = self.gpus = 0
        self.graph = False
        self.ranks = 0
        self.version = self.nccl = ""
        self.rows: list[Row] = []

    def done(self) -> Output:
        op = BINARIES.get(self.binary)
        if op is None:
            raise NcclTestsError(
                f"{self.source}: '{self.binary}' is not one of nccl-tests' collectives ({', '.join(BINARIES)})"
            )
        ranks = self.ranks or self.threads * self.gpus
        return Output(
            binary=self.binary,
            op=op,
            ranks=ranks,
            graph=self.graph,
            version=self.version,
            nccl=self.nccl,
            source=self.source,
            rows=tuple(self.rows),
        )


def parse(text: str, source: str = "", binary: str = "") -> list[Output]:
    """Every nccl-tests output in `text`; `binary` names the collective of an output whose header
    lacks the `Collective test starting` line (older nccl-tests), e.g. from the file's name."""
    outputs: list[Output] = []
    current: _Reading | None = _Reading(binary, source) if binary else None
    version = ("", "")
    for number, line in enumerate(text.splitlines(), 1):
        where = f"{source or 'nccl-tests output'} line {number}"
        stripped = line.strip()
        if not stripped:
            continue
        if m := VERSION.match(stripped):
            version = (m.group(1), _nccl_version(m.group(3)))
            continue
        if m := STARTING.match(stripped):
            if current is not None and current.rows:
                outputs.append(current.done())
            current = _Reading(m.group(1), source)
            current.version, current.nccl = version
            continue
        if stripped.startswith("#"):
            if current is not None:
                if m := PARAMS.match(stripped):
                    current.threads, current.gpus, current.graph = int(m.group(1)), int(m.group(2)), m.group(3) != "0"
                elif RANK.match(stripped):
                    current.ranks += 1
            continue
        fields = stripped.split()
        if current is None:
            raise NcclTestsError(
                f"{where}: a result before any header naming the collective "
                "(pass the binary's name, e.g. all_reduce_perf)"
            )
        if len(fields) != LINE_FIELDS:
            raise NcclTestsError(
                f"{where}: {len(fields)} fields, not nccl-tests' {LINE_FIELDS} "
                "(per-iteration columns, -I 1, are not read)"
            )
        pre, out, inp = (
            fields[:PREAMBLE_FIELDS],
            fields[PREAMBLE_FIELDS : PREAMBLE_FIELDS + DIRECTION_FIELDS],
            fields[PREAMBLE_FIELDS + DIRECTION_FIELDS :],
        )
        current.rows.append(
            Row(
                bytes=int(_number(pre[0], where)),
                count=int(_number(pre[1], where)),
                type=pre[2],
                redop=pre[3],
                root=int(_number(pre[4], where)),
                out_of_place=_figures(out, where),
                in_place=_figures(inp, where),
            )
        )
    if current is not None and current.rows:
        outputs.append(current.done())
    return outputs


def read(path: Path) -> list[Output]:
    """The outputs in one file (the binary from the file's name where its header does not say)."""
    try:
        text = path.read_text(errors="replace")
    except OSError as exc:
        raise NcclTestsError(f"cannot read {path}: {exc.strerror or exc}") from None
    named = next((b for b in BINARIES if b in path.name), "")
    outputs = parse(text, str(path), named)
    if not outputs:
        raise NcclTestsError(f"{path}: no nccl-tests results in it")
    return outputs
