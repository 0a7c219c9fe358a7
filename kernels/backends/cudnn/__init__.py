"""cuDNN called directly, through NVIDIA's cudnn-frontend (its Python graph API).

Convolution forward, backward-data and backward-filter in fp32, tf32, fp16 and bf16, and int8
forward with int32 output, each direction on an engine chosen reproducibly among those that
compute it correctly (../engine_choice.py; raced in a process of its own, race_apart.py),
recorded in the result and re-runnable with --cudnn-engine. PyTorch reaches cuDNN too, but
cannot express DeepBench's int8 convolution, and its `cudnn.benchmark` picks an engine it does
not name (two H100s picked different ones for a quarter of the training convolutions)."""
