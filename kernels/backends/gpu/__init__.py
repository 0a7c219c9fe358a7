"""The GPU layer every GPU backend measures through: the device protocol (device.py) and its implementations,
one folder per GPU runtime (cuda/: NVIDIA's; a HIP sibling would sit beside it)."""
