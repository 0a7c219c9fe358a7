"""The oneDNN backend: Intel's deep-learning primitives called directly through oneDNN's C API
(ctypes over libdnnl.so.3 from the `onednn` wheel, binding.py), as DeepBench's Intel benchmarks called
MKL-DNN: convolutions (conv.py: forward and both backward passes, the implementation raced,
race.py), recurrent layers (rnn.py) and batched GEMMs (matmul.py), each primitive on tensors in the
layout it chose, timed with the host clock around its execution. No compiler is needed: nothing is
built at install time. Its options and facts are declared in declaration.py (importable without
oneDNN)."""
