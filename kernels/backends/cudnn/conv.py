"""Convolution on cuDNN's graph API: each direction one graph, one engine, one library call.

The problem is DeepBench's (`conv_bench.cu`): its layouts by default (declaration.layouts: --layout),
its directions (forward only in the inference sets, as its `if (!inference)`), its padding (half
channels to 8; int8 channels, height and width to 4, then channels to 32; kernels/padding.py),
fp32 accumulation for 16-bit types and int32 for int8. The engine is chosen by ../engine_choice.py (or
pinned with --cudnn-engine). Checks: sampled output elements recomputed in float64 from the
definition (kernels/reference/conv.py, the sampler the PyTorch backend is checked with too), exact for int8."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

import torch

from ...catalog import ConvKernel
from ...precision import Precision
from ...reference.conv import ConvSampler, padded_conv, transform_aware
from ...results import Check
from ...timing.graph_events import EagerFigure, quick_us, screen_figure
from ...timing.stopping import StopRule
from ..contract.base import Backend, Prepared, TimedPart, Unsupported
from ..contract.layout_info import NCHW, NHWC
from ..contract.timed_directions import INFERENCE_FORWARD_ONLY
from . import engine_choice as engines
from . import graphs
from .declaration import CUDNN, layouts
from .engine_cache import FROM_PIN, FROM_RACE, EngineCache, Entry, Found, Leader, entry_key, leaders_of
from .search import FAMILY_KEYS, Search, built, family, knob_grid, knob_ranges, offer_plans, typed_knobs

if TYPE_CHECKING:
    from .backend import CudnnBackend

# How long a pin by plan name searches its engine's knob choices for the plan (race_apart.py's measuring
# process finds the child's plan at once by its recorded knobs; a name typed by hand may need the grid).
PIN_SEARCH_S = 60.0
REFINE_SAMPLES = 4  # a contender's second timing: 4 samples of timing.graph_events.QUICK_SAMPLE_S
RACED_APART = "a process of its own (--engine-race apart, kernels/backends/cudnn/race_apart.py)"
RACED_HERE = "the measuring process (--engine-race inline)"
INT8_NCHW = "cuDNN's int8 convolution runs with channels innermost (NHWC): it has no int8 NCHW path"
INPUT_ROLES = {"fwd": ("x", "w"), "bwd_data": ("dy", "w"), "bwd_filter": ("x", "dy")}
OUTPUT_ROLE = {"fwd": "y", "bwd_data": "dx", "bwd_filter": "dw"}


def prepare(
    backend: CudnnBackend, kernel: ConvKernel, precision: Precision, listing: list[Race] | None = None
) -> Prepared:
    """The kernel's directions, each on its chosen (or pinned) plan; `listing`, where given, receives each
    direction's Race (tests/benchmarks/conv_engines.py lists every configuration with them)."""
    if precision not in graphs.TYPES:
        raise Unsupported(f"cuDNN's convolution has no {precision.value} path here (fp32, tf32, fp16, bf16, int8)")
    ctx = backend.ctx
    options = CUDNN.options_of(backend.settings)
    timed_layouts = layouts(precision, options.layout)
    layout, why = backend.layout or timed_layouts[0]  # a layout set on the backend: the other of --layout both
    if precision is Precision.INT8 and layout == NCHW:
        raise Unsupported(INT8_NCHW)
    cl = layout == NHWC
    kk, padded = padded_conv(kernel, precision, ctx.pad)
    directions = graphs.PRECISION_DIRECTIONS.get(precision, kernel.timed())
    pins = {d: engines.pin_for(options.engines, f"{kernel.id}/{precision.value}", d) for d in directions}
    races = not all(pins.values())
    apart = races and options.engine_race == "apart"  # race_apart.py says why
    warmed: dict[str, Any] = {}
    if races:  # the run's facts say where the cache was and what it refused, also where the race is apart
        backend.open_engine_cache()
    if races:  # candidates are timed on a GPU at its working temperature, as measurements are (here: once a run)
        assert backend.cuda is not None  # set with the binding, which prepare() checked
        backend.cuda.warm(warmed)
    # before this process allocates
    asked = time.monotonic()
    raced = backend.race_apart.choices(kernel, precision, ctx.pad, (layout, why)) if apart else {}
    waited_s = time.monotonic() - asked
    dtype = graphs.TORCH_DTYPES[precision]
    data = {
        "x": ctx.random((kk.n, kk.c, kk.h, kk.w), dtype),
        "w": ctx.random((kk.k, kk.c, kk.r, kk.s), dtype, scale=(kk.c * kk.r * kk.s) ** -0.5),
        "dy": ctx.random((kk.n, kk.k, kk.out_h, kk.out_w), dtype),
    }
    if cl:
        data = {role: t.contiguous(memory_format=torch.channels_last) for role, t in data.items()}
    out_dtype = torch.int32 if precision is Precision.INT8 else dtype
    sampler = ConvSampler(ctx, kk, data["x"], data["w"], data["dy"])
    checks: dict[str, Callable[[torch.Tensor], Check]] = {
        "fwd": lambda y: sampler.check_fwd(y, precision),
        "bwd_data": lambda dx: sampler.check_bwd_data(dx, precision),
        "bwd_filter": lambda dw: sampler.check_bwd_filter(dw, precision),
    }
    out_dims = {
        "fwd": (kk.n, kk.k, kk.out_h, kk.out_w),
        "bwd_data": (kk.n, kk.c, kk.h, kk.w),
        "bwd_filter": (kk.k, kk.c, kk.r, kk.s),
    }
    parts = []
    for direction in directions:
        out = graphs.tensor_for(out_dims[direction], out_dtype, cl)
        race = Race(backend, kk, precision, direction, data, out, checks[direction], cl)
        if listing is not None:
            listing.append(race)
        part = _direction(race, pins[direction], raced[direction] if apart and not pins[direction] else None)
        part.flops, part.min_bytes = kernel.flops(direction), kernel.min_bytes(direction, precision)
        part.info.update(layout=layout, layout_reason=why)
        parts.append(part)
    parts[0].info["cudnn"].update(warmed)
    if apart:  # the kernel's whole race, its directions' searches and the child's own inputs and checks
        parts[0].info["cudnn"]["race_apart_s"] = waited_s
    info: dict[str, Any] = {}
    if precision is Precision.INT8:
        info.update(directions=list(directions), backward=graphs.INT8_FORWARD_ONLY)
    elif kernel.forward_only:
        info.update(directions=list(directions), backward=INFERENCE_FORWARD_ONLY)
    beside = timed_layouts[1:] if backend.layout is None else []
    after = beside_layout(backend, kernel, precision, *beside[0]) if beside else None
    return Prepared(parts=parts, padding=padded, info=info, after=after)


def beside_layout(
    backend: CudnnBackend, kernel: ConvKernel, precision: Precision, layout: str, why: str
) -> Callable[[Backend, StopRule], dict[str, Any]]:
    """--layout both: the kernel prepared again in `layout`, each direction raced, timed and checked
    as the result's own were, under the key `other_layout` (layout_info.py reads it back)."""

    def after(_outer: Backend, rule: StopRule) -> dict[str, Any]:
        record: dict[str, Any] = {"layout": layout}
        try:
            with backend.in_layout(layout, why):
                other = backend.prepare(kernel, precision)
        except Unsupported as exc:
            return {"other_layout": {**record, "note": str(exc)}}
        timed: dict[str, Any] = {}
        for part in other.parts:
            part.run()  # warm-up, as the harness's first call
            stats = (part.timer(part.run, rule) if part.timer else backend.measure(part.run, rule, part)).stats
            check = part.check()
            if not check.passed:
                failed = f"{part.direction}: check failed (error {check.error} > tolerance {check.tolerance})"
                return {"other_layout": {**record, "failed": failed}}
            timed[part.direction] = {"time_us": stats.model_dump(), "check": check.model_dump(), **part.info}
        return {"other_layout": {**record, "parts": timed}}

    return after


def _direction(race: Race, pin: str | None, raced: dict[str, Any] | None) -> TimedPart:
    """The direction's part, on its pinned plan, on the plan chosen by the race apart (`raced`: its
    record, race_apart.py), or on the plan chosen by a race here."""
    backend, direction, out = race.backend, race.direction, race.out
    if raced is not None:
        at = raced["heuristic_index"]
        asked = time.monotonic()
        chosen = _pinned(backend.lib, race.fresh(), raced["plan_name"], at, raced.get("knobs"))
        record = {**raced, "raced_in": RACED_APART, "rebuild_s": time.monotonic() - asked}
        if raced.get("source", "heuristics") == "heuristics" and chosen.index != at:
            record["heuristic_index_here"] = chosen.index  # found elsewhere: the two processes' lists differed
    elif pin:
        chosen = _pinned(backend.lib, race.fresh(), pin)
        record = {
            **chosen.record(),
            **race.family(chosen),
            "chosen_by": f"pinned (--cudnn-engine {pin})",
            "engine_from": FROM_PIN,
        }
    else:
        chosen, record = race.choose()
        record["raced_in"] = RACED_HERE
    run = race.runner(chosen)
    info = {
        "library": "cuDNN",
        "api": "graph (cudnn-frontend)",
        "cudnn": record,
    }
    return TimedPart(direction, run, race.check_of(run), 0.0, 0.0, info=info, output=out)


class Race:
    """One direction's graph (a fresh one per pass: cuDNN plans once per graph), and how a candidate
    of it is run, timed and checked; `choose` races them (tests/benchmarks/conv_engines.py lists them)."""

    def __init__(
        self,
        backend: CudnnBackend,
        kk: ConvKernel,
        precision: Precision,
        direction: str,
        data: dict[str, torch.Tensor],
        out: torch.Tensor,
        check_out: Callable[[torch.Tensor], Check],
        channels_last: bool,
    ) -> None:
        self.backend, self.kk, self.precision, self.direction = backend, kk, precision, direction
        self.data, self.out, self.check_out, self.channels_last = data, out, check_out, channels_last
        self.graph: Any = None
        self.pack: dict[Any, torch.Tensor] = {}
        self.screens: dict[int, EagerFigure] = {}  # each screened candidate's figure, by its index, until timed

    def new_graph(self) -> Any:
        """A fresh graph of the direction, validated and lowered, not yet planned."""
        return graphs.build(
            self.backend.lib, self.backend.handle.handle, self.kk, self.precision, self.direction, self.channels_last
        )

    def fresh(self) -> Any:
        """A fresh graph, the one the runners below run on from now."""
        g, roles = self.new_graph()
        pack = {roles[r]: self.data[r] for r in INPUT_ROLES[self.direction]}
        pack[roles[OUTPUT_ROLE[self.direction]]] = self.out
        self.graph, self.pack, self.screens = g, pack, {}
        return g

    def search(self, compiled: bool, budget: engines.Budget, **listing: Any) -> Search:
        """Every configuration of a fresh graph (search.py), engines compiled at run time only when
        `compiled`; `listing`: Search's grid_cap and log (tests/benchmarks/conv_engines.py)."""
        g = self.fresh()
        return Search(self.backend.lib, g, self.precision, compiled, self.workspace_limit(), budget, **listing)

    def workspace_limit(self) -> int:
        """The most workspace a candidate may take now (engine_choice.workspace_limit of the GPU's free memory)."""
        assert self.backend.cuda is not None  # a backend without its GPU prepares nothing
        return engines.workspace_limit(self.backend.cuda.free_memory_bytes())

    def runner(self, e: engines.Engine) -> Callable[[], None]:
        g, pack, handle = self.graph, self.pack, self.backend.handle
        workspace = self.backend.workspace_for(e.workspace)

        def run() -> None:
            g.execute_plan_at_index(pack, workspace, e.index, handle=handle.bind())

        return run

    def check_of(self, run: Callable[[], None]) -> Callable[[], Check]:
        """The check of what `run` last wrote (with Winograd/FFT's tolerance where its kernels are those)."""
        out = self.out
        return transform_aware(TimedPart(self.direction, run, lambda: self.check_out(out), 0.0, 0.0), self.precision)

    def check_engine(self, e: engines.Engine) -> Check:
        self.out.fill_(0)  # the check must see what this engine wrote, not the previous one's output
        run = self.runner(e)
        run()
        return self.check_of(run)()

    def screened(self, e: engines.Engine) -> engines.Screen:
        """The candidate's screen figure (graph_events.screen_figure), kept for its timing."""
        figure = screen_figure(self.runner(e))
        self.screens[e.index] = figure
        return engines.Screen(figure.us_per_call, figure.gpu_bound)

    def timed(self, e: engines.Engine, out_of_contest_us: float) -> float:
        run = self.runner(e)
        return quick_us(run, out_of_contest_us=out_of_contest_us, estimate=self.screens.pop(e.index, None))

    def refined(self, e: engines.Engine) -> float:
        return quick_us(self.runner(e), samples=REFINE_SAMPLES)

    def family(self, e: engines.Engine) -> dict[str, Any]:
        return family(self.backend.lib, lambda: self.new_graph()[0], e)

    @property
    def layout(self) -> str:
        return NHWC if self.channels_last else NCHW

    def choose(self) -> tuple[engines.Engine, dict[str, Any]]:
        """The direction's plan: raced among the leaders the engine cache keeps for it (engine_cache.py),
        else over cuDNN's whole search (`search_whole`), whose leaders the cache then keeps."""
        cache = self.backend.engine_cache
        key = entry_key(self.kk, self.precision, self.layout, self.direction)
        note: dict[str, Any] = {}
        if cache is not None:
            found, warning = cache.lookup(key)
            if warning:
                note["warning"] = warning
            if found is not None:
                raced = self.race_leaders(found)
                if not isinstance(raced, str):
                    choice, record = raced
                    note.update(source=found.path, leaders=len(found.entry.leaders))
                    return choice.chosen, self._kept(cache, key, choice, record, found.source, note)
                note["missed"] = f"{found.path}: {raced}; searched whole"
        choice, record = self.search_whole()
        note.update(source="", leaders=0)
        return choice.chosen, self._kept(cache, key, choice, record, FROM_RACE, note)

    def _kept(
        self,
        cache: EngineCache | None,
        key: str,
        choice: engines.Choice,
        record: dict[str, Any],
        source: str,
        note: dict[str, Any],
    ) -> dict[str, Any]:
        """The record, with where its engine came from (`source`; `note`: the cache's part in it); the race's
        leaders recorded in the user's cache."""
        if cache is not None:
            family = {k: record[k] for k in FAMILY_KEYS if k in record}
            entry = Entry(leaders_of(choice), family, bool(record.get("runtime_compiled_allowed")))
            refused = cache.record(key, entry)
            note["recorded"] = not refused
            if refused:
                note["warning"] = "; ".join(filter(None, (note.get("warning", ""), refused)))
        return {**record, "engine_from": source, **({"engine_cache": note} if cache is not None else {})}

    def search_whole(self) -> tuple[engines.Choice, dict[str, Any]]:
        """engine_choice's rule over the precompiled configurations; where none of them computes the
        direction correctly (or there is none), over the ones cuDNN compiles at run time (seconds
        each: the int8 convolutions on an H100, where the precompiled int8 engines wrote wrong outputs)."""
        first: list[dict[str, Any]] = []
        for compiled, seconds in ((False, engines.RACE_BUDGET_S), (True, engines.COMPILED_RACE_BUDGET_S)):
            budget = engines.Budget(seconds)
            found = self.search(compiled, budget)
            try:
                choice = engines.choose(
                    found.candidates(),
                    self.timed,
                    self.check_engine,
                    refine=self.refined,
                    budget=budget,
                    screen=self.screened,
                )
            except engines.NoCorrectEngine as exc:
                census = found.finish(exc.table)
                if compiled and not found.offered:
                    break
                if compiled:
                    raise
                first = [{"pass": "precompiled engines", "outcome": str(exc)[:1000], "search": census}]
                continue
            asked = time.monotonic()
            named = self.family(choice.chosen)
            found.census.family_s = time.monotonic() - asked
            record = {**choice.record(), **named, "search": found.finish(choice.table)}
            if compiled:
                record.update(runtime_compiled_allowed=True, earlier=first)
            return choice, record
        kk = self.kk
        raise Unsupported(
            f"cuDNN offers no engine for this {self.precision.value} {self.direction} convolution "
            f"(n={kk.n} c={kk.c} h={kk.h} w={kk.w} k={kk.k} r={kk.r} s={kk.s})"
            + (f"; {first[0]['outcome']}" if first else "")
        )

    def race_leaders(self, found: Found) -> tuple[engines.Choice, dict[str, Any]] | str:
        """engine_choice's rule among a cached entry's leaders alone, each rebuilt here by its name (where the
        heuristics offered it, else from its engine and knobs); why not where none builds here or computes
        the direction correctly (the caller then searches whole)."""
        asked = time.monotonic()
        entry = found.entry
        g = self.fresh()
        offer_plans(self.backend.lib, g)
        limit = self.workspace_limit()
        census = engines.Census(enumerated=len(entry.leaders), setup_s=time.monotonic() - asked)
        built: list[engines.Engine] = []
        for leader in entry.leaders:
            census.tried += 1
            e = rebuilt(self.backend.lib, g, leader)
            if e is None:
                census.reject("failed_to_build")
                continue
            census.built += 1
            if e.workspace > limit:
                census.reject("over_workspace")
                continue
            built.append(e)
        if not built:
            return f"none of its {len(entry.leaders)} leaders builds here"
        try:
            choice = engines.choose(built, self.timed, self.check_engine, refine=self.refined, screen=self.screened)
        except engines.NoCorrectEngine as exc:
            return f"none of its leaders computed this direction correctly ({str(exc)[:300]})"
        census.count_race(choice.table)
        named = entry.family
        if choice.chosen.name != entry.leaders[0].plan_name or not named:  # another leader won: name its family
            started = time.monotonic()
            named = self.family(choice.chosen)
            census.family_s = time.monotonic() - started
        census.spent_s = time.monotonic() - asked
        record = {**choice.record(), **named, "search": census.record()}
        if entry.compiled:
            record["runtime_compiled_allowed"] = True
        return choice, record


def rebuilt(cudnn: Any, g: Any, leader: Leader) -> engines.Engine | None:
    """A cached leader's plan built on `g` (whose heuristics' plans were offered), found by its name: where
    the heuristics offered it, else re-created from its engine and knobs; None where no plan of that name
    builds here (a hidden knob the listed ones miss, or a GPU or library that no longer serves it)."""
    count = g.get_execution_plan_count()
    e = None
    if leader.heuristic_index is not None and 0 <= leader.heuristic_index < count:
        e = _built_or_none(g, leader.heuristic_index)
        if e is not None and e.name == leader.plan_name:
            e.source = "heuristics"
        else:
            e = None
    if e is None:
        try:
            g.create_execution_plan(leader.engine_id, typed_knobs(cudnn, leader.knobs))
        except Exception:  # noqa: BLE001 - an engine or knob this graph no longer takes
            return None
        e = _built_or_none(g, g.get_execution_plan_count() - 1)
        if e is None or e.name != leader.plan_name:
            return None
        e.source = "enumeration"
    e.rank = leader.rank
    return e


def _pinned(
    cudnn: Any, g: Any, spec: str, at: int | None = None, knobs: dict[str, int] | None = None
) -> engines.Engine:
    """The plan a pin names: a plan name (`at`, `knobs`: where the race found it, tried first), or
    ENGINE_ID:KNOBS re-created from cudnn-frontend's knobs."""
    if engines.is_plan_name(spec):
        return _named_plan(cudnn, g, spec.strip(), at, knobs)
    engine_id, knobs = engines.parse_spec(spec)
    try:
        typed = typed_knobs(cudnn, knobs)
    except AttributeError as exc:
        raise Unsupported(f"cuDNN engine '{spec}': unknown knob ({exc})") from None
    g.create_execution_plan(engine_id, typed)
    index = g.get_execution_plan_count() - 1
    try:
        g.build_plan_at_index(index)
    except Exception as exc:  # noqa: BLE001 - the pinned engine does not serve this problem here
        raise Unsupported(f"the pinned cuDNN engine '{spec}' cannot run this convolution here: {exc}"[:500]) from None
    return engines.Engine(
        index=index,
        engine_id=engine_id,
        knobs=knobs,
        name=str(g.get_plan_name_at_index(index)),
        workspace=int(g.get_workspace_size_plan_at_index(index)),
    )


def _named_plan(
    cudnn: Any, g: Any, name: str, at: int | None = None, knobs: dict[str, int] | None = None
) -> engines.Engine:
    """The plan cuDNN names `name`: the exact plan, every knob included, which re-creating it from
    cudnn-frontend's knob list cannot promise. Looked for where the race found it (`at` in the
    heuristics' list, or re-created from its engine and recorded `knobs`: building only that plan
    spares building or compiling others), then among all the plans the heuristics offer for this graph
    (a recorded plan may need runtime compilation or a large workspace), then, as the race's search
    enumerates them (search.py), among the engine's configurations: its default knobs, then its knob
    grid, for at most PIN_SEARCH_S."""
    offer_plans(cudnn, g)
    count = g.get_execution_plan_count()
    engine_id = int(name[len("eng") :].partition("_")[0])

    def created(config: dict[str, int]) -> engines.Engine | None:
        try:
            g.create_execution_plan(engine_id, typed_knobs(cudnn, config))
        except Exception:  # noqa: BLE001 - a configuration this engine refuses (or an engine not for this graph)
            return None
        return _built_or_none(g, g.get_execution_plan_count() - 1)

    def places() -> Iterator[engines.Engine | None]:
        if at is not None and 0 <= at < count:
            yield _built_or_none(g, at)
        if knobs is not None:
            yield created(knobs)
        yield from (_built_or_none(g, i) for i in range(count))
        yield created({})
        try:
            grid = knob_grid(knob_ranges(cudnn, g.get_knobs_for_engine(engine_id)))
        except Exception:  # noqa: BLE001 - the engine does not serve this graph, or its knobs are unreadable
            return
        budget = engines.Budget(PIN_SEARCH_S)
        for config in grid:
            if budget.exhausted():
                return
            yield created(config)

    for e in places():
        if e is not None and e.name == name:
            return e
    raise Unsupported(
        f"cuDNN offers no plan named '{name}' for this convolution here, among its heuristics' plans nor "
        f"engine {engine_id}'s knob choices (searched for {PIN_SEARCH_S:.0f} s at most; another cuDNN or GPU "
        "than the one that recorded it?); pin ENGINE_ID:KNOBS to re-create it from its knobs"
    )


def _built_or_none(g: Any, index: int) -> engines.Engine | None:
    """The plan at `index`, built; None where it was deselected or this GPU cannot build it."""
    try:
        return built(g, index)
    except Exception:  # noqa: BLE001 - deselected, or a plan this GPU cannot build
        return None
