"""How samples are taken and when to stop, one job per module, as nvbench keeps its measurements
and stopping criteria apart.

- stopping.py: the stopping criteria (sample cap, minimum samples and time, relative noise, time
  cap, call budget) and StopRule, the harness's rule composed of them;
- sampling.py: the one sampling loop of every timer;
- cpu.py: the CPU timer (host clock);
- cuda.py: the GPU timer; strategy.py picks its measurement strategy, one module each:
  graph_events.py (graph replays timed by events), cupti_kernel.py (graph replays timed by CUPTI's
  kernel records), cold_l2.py (one call after an L2 flush), eager.py (the fallback); graph.py
  captures and calibrates graphs, events.py holds the event primitives, sampler.py what a
  strategy hands the loop;
- clocked.py: the GPU timer's side of the loop (throttled samples, settling); clocks.py reads the
  clocks (NVML), settling.py judges the readings, warmup.py heats the GPU before the first figure;
- profiler_check.py: the profiler cross-check (--verify-timing); cupti.py reads CUPTI's records.

The collective timer (backends/collectives/common.py) uses sampling.py and stopping.py too."""
