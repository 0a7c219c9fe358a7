"""The engine race's leaders kept between runs (--engine-cache): a direction raced once on a kind of GPU
with a cuDNN and a frontend is raced again only among the plans that led it.

An entry is kept per library key (the GPU's model, its compute capability, cuDNN's and cudnn-frontend's
versions: a cache never crosses them) and per entry key (the padded problem, the precision, the layout
and the direction): the chosen plan first, then its fastest runners-up (LEADERS in all), each with what
re-creates it (its plan name, engine, knobs, index among the heuristics' plans), its rank in the search's
order (engine_choice's tie rule between plans within MARGIN reads it), its race figure and workspace,
and the winner's family. A later race of that direction builds those plans only, times, checks and
chooses among them by the same rule (conv.Race.race_leaders): every direction is still checked, and
one whose leaders no longer build or compute correctly is searched whole.

Two dbs (contract/find_db.py, MIOpen's Find-Db the model): the user's (XDG_CACHE_HOME/deepbench/
cudnn-engines, or the folder --engine-cache names), which takes precedence and records every race, and
the system db shipped in this package (find_db/), filled from GPU sittings for the GPUs measured; a
result says which one its leaders came from (info.cudnn.engine_from). Free of torch and cuDNN."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ...catalog import ConvKernel
from ...precision import Precision
from ..contract.find_db import FindDb, FindDbSpec
from .engine_choice import Choice, Engine

KIND = "cudnn-engines"
SHIPPED = Path(__file__).resolve().parent / "find_db"
SPEC = FindDbSpec(
    KIND,
    "cuDNN engine races' leaders, per GPU model, compute capability, cuDNN and cudnn-frontend versions, "
    "problem, precision, layout and direction",
    SHIPPED,
)
LEADERS = 4  # the winner and its three fastest runners-up: the warm race's candidates
OFF = "off"
# Where a direction's engine came from (info.cudnn.engine_from).
FROM_RACE, FROM_CACHE, FROM_SYSTEM, FROM_PIN = "race", "cache", "system-db", "pinned"


def library_key(device: str, capability: str, cudnn: str, frontend: str) -> dict[str, str]:
    """What an entry is valid for: the GPU model and compute capability, cuDNN's and the frontend's versions."""
    return {"device": device, "capability": capability, "cudnn": cudnn, "cudnn_frontend": frontend}


def entry_key(kk: ConvKernel, precision: Precision, layout: str, direction: str) -> str:
    """The padded problem, the precision, the layout and the direction (everything the race's answer depends
    on besides the library key)."""
    shape = f"n{kk.n}c{kk.c}h{kk.h}w{kk.w}k{kk.k}r{kk.r}s{kk.s}p{kk.pad_h}x{kk.pad_w}u{kk.stride_h}x{kk.stride_w}"
    return f"{precision.value}/{layout.lower()}/{direction}/{shape}"


@dataclass(frozen=True)
class Leader:
    """One plan that led a race, with what re-creates it here."""

    plan_name: str
    engine_id: int
    knobs: dict[str, int]
    rank: int
    quick_us: float
    workspace: int = 0
    heuristic_index: int | None = None  # where the heuristics offered it (None: created from its knobs)

    @classmethod
    def of(cls, e: Engine, quick_us: float) -> Leader:
        at = e.index if e.source == "heuristics" else None
        return cls(e.name, e.engine_id, dict(e.knobs), e.rank, float(quick_us), e.workspace, at)

    @classmethod
    def parse(cls, raw: dict[str, Any]) -> Leader:
        return cls(
            plan_name=str(raw["plan_name"]),
            engine_id=int(raw["engine_id"]),
            knobs={str(k): int(v) for k, v in dict(raw.get("knobs", {})).items()},
            rank=int(raw.get("rank", 0)),
            quick_us=float(raw.get("quick_us", 0.0)),
            workspace=int(raw.get("workspace", 0)),
            heuristic_index=None if raw.get("heuristic_index") is None else int(raw["heuristic_index"]),
        )


@dataclass
class Entry:
    """A direction's leaders (the chosen one first), the winner's family, and whether they are engines cuDNN
    compiles at run time (the race's later pass: no precompiled engine computed the direction correctly)."""

    leaders: list[Leader]
    family: dict[str, Any] = field(default_factory=dict)
    compiled: bool = False

    def stored(self) -> dict[str, Any]:
        return {"leaders": [asdict(x) for x in self.leaders], "family": self.family, "compiled": self.compiled}

    @classmethod
    def parse(cls, raw: dict[str, Any]) -> Entry:
        """The entry a db holds (ValueError, KeyError or TypeError where it is not one)."""
        leaders = [Leader.parse(x) for x in raw["leaders"]]
        if not leaders:
            raise ValueError("no leaders")
        return cls(leaders, dict(raw.get("family", {})), bool(raw.get("compiled", False)))


def leaders_of(choice: Choice, keep: int = LEADERS) -> list[Leader]:
    """The chosen plan, then the fastest timed candidates that no check rejected, `keep` in all."""
    rows = list(zip(choice.table, choice.drawn, strict=True))
    timed = sorted(
        ((row["quick_us"], i) for i, (row, e) in enumerate(rows) if "quick_us" in row and row["status"] != "rejected"),
        key=lambda t: t[0],
    )
    chosen = next((row for row, e in rows if e.index == choice.chosen.index), {})
    leaders = [Leader.of(choice.chosen, float(chosen.get("quick_us", choice.fastest_correct_us)))]
    for us, i in timed:
        if len(leaders) >= keep:
            break
        if rows[i][1].index != choice.chosen.index:
            leaders.append(Leader.of(rows[i][1], us))
    return leaders


@dataclass
class Found:
    """A cached entry and where it came from (FROM_CACHE: the user's db; FROM_SYSTEM: the shipped one)."""

    entry: Entry
    source: str
    path: str


class EngineCache:
    """The user's db (None: --engine-cache off) and the shipped one, for one library key."""

    def __init__(self, user: FindDb | None, system: FindDb | None, library: dict[str, str]) -> None:
        self.user, self.system, self.library = user, system, library

    @classmethod
    def open(cls, setting: str, library: dict[str, str], shipped: Path = SHIPPED) -> EngineCache | None:
        """The cache --engine-cache asks for: '' the user's folder, 'off' none at all, else that folder."""
        if setting == OFF:
            return None
        folder = Path(setting) if setting else SPEC.user_folder()
        return cls(FindDb(folder, KIND), FindDb(shipped, KIND, writable=False), library)

    def warnings(self) -> list[str]:
        """A line for each db file that is refused (corrupt, foreign, unreadable)."""
        dbs = [db for db in (self.user, self.system) if db is not None]
        return [line for line in (db.refusal(self.library) for db in dbs) if line]

    def lookup(self, key: str) -> tuple[Found | None, str]:
        """The user's entry, else the shipped one's, and a refusal line where a file or its entry was refused."""
        notes = []
        for db, source in ((self.user, FROM_CACHE), (self.system, FROM_SYSTEM)):
            if db is None:
                continue
            got = db.lookup(self.library, key)
            if got.refused:
                notes.append(got.refused)
            if got.entry is None:
                continue
            try:
                return Found(Entry.parse(got.entry), source, str(got.path)), "; ".join(notes)
            except (ValueError, KeyError, TypeError) as exc:
                notes.append(f"{got.path}: its entry {key} is not one ({type(exc).__name__}: {exc}): refused")
        return None, "; ".join(notes)

    def record(self, key: str, entry: Entry) -> str:
        """Keep a race's leaders in the user's db; a refusal line where it could not ('' where it did)."""
        return self.user.record(self.library, key, entry.stored()) if self.user is not None else ""
