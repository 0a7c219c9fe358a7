"""The nccl and rccl backends: collectives through NCCL (RCCL on ROCm): NCCL's own calls through nccl4py
where it loads (nccl4py_comm.py), torch.distributed's otherwise (backend.py)."""
