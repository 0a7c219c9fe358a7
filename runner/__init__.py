"""The host side of DeepBench (`deepbench.runner`): CLI, platform registry, image build and
launch, result collection, reports and submissions. Imports no PyTorch."""
