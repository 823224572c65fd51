"""System metrics: the sampler thread (CPU, memory, disk, network) and NVIDIA GPUs
through NVML.
"""
