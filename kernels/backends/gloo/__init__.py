"""The gloo backend: collectives through torch.distributed's gloo process group, on host buffers (backend.py)."""
