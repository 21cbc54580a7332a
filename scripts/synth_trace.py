#!/usr/bin/env python3
"""Writes a synthetic Kineto-style trace of about SIZE bytes (default 1 GiB) for measuring
`remora trace import` speed and memory (docs/trace.md "Speed"). Not a fixture: generate it in /tmp,
measure, delete it.

Usage: synth_trace.py OUT.json [SIZE_BYTES]

The mix follows what a PyTorch profiler trace of a training step holds (the traces under
HolisticTraceAnalysis tests/data): per launched kernel a cpu_op, a cudaLaunchKernel runtime call,
a flow start/end pair and the kernel on one of two streams (compute 7, NCCL 20), one line each,
plus a ProfilerStep#N annotation per 20000 kernels. Deterministic (fixed seed).
"""
import random
import sys

out, size = sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 1 << 30
rng = random.Random(16)
names = [
    "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<c10::BFloat16>, "
    "at::detail::Array<char*, 3> >(int, at::native::CUDAFunctor_add<c10::BFloat16>, at::detail::Array<char*, 3>)",
    "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_execute_segment_k_off_kernel__5x_cublas",
    "void flash_fwd_kernel<Flash_fwd_kernel_traits<128, 128, 64, 4, false, false, cutlass::bfloat16_t> >(Flash_fwd_params)",
    "void at::native::(anonymous namespace)::vectorized_layer_norm_kernel<c10::BFloat16, float>(int, float, c10::BFloat16 const*)",
]
nccl = "ncclDevKernel_AllGather_RING_LL(ncclDevKernelArgsStorage<4096ul>)"
with open(out, "w") as f:
    f.write('{\n  "schemaVersion": 1,\n  "distributedInfo": {"backend": "nccl", "rank": 0, "world_size": 8},\n'
            '  "traceEvents": [\n')
    f.write('  {"ph": "M", "name": "process_name", "pid": 0, "tid": 0, "args": {"name": "python3"}}')
    ts_cpu, ts_gpu, ts_comm, n, step_start = 1_000_000.0, 1_000_100.0, 1_000_100.0, 0, 1_000_000.0
    step = 0
    while f.tell() < size:
        n += 1
        ext, corr = n, n + 7
        if n % 10 == 0:
            name, stream, dur = nccl, 20, rng.uniform(20, 200)
            ts = max(ts_comm, ts_cpu + 5)
            ts_comm = ts + dur + 1
        else:
            name, stream, dur = names[n % len(names)], 7, rng.uniform(2, 80)
            ts = max(ts_gpu, ts_cpu + 5)
            ts_gpu = ts + dur + 0.5
        f.write(',\n  {"ph": "X", "cat": "cpu_op", "name": "aten::add", "pid": 4000, "tid": 4001,'
                ' "ts": %.3f, "dur": 4.2, "args": {"External id": %d, "Record function id": 0, "Ev Idx": %d}}'
                % (ts_cpu, ext, n))
        f.write(',\n  {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 4000, "tid": 4001,'
                ' "ts": %.3f, "dur": 3.1, "args": {"External id": %d, "cbid": 211, "correlation": %d}}'
                % (ts_cpu + 0.5, ext, corr))
        f.write(',\n  {"ph": "s", "id": %d, "pid": 4000, "tid": 4001, "ts": %.3f, "cat": "ac2g", "name": "ac2g"}'
                % (corr, ts_cpu + 0.5))
        f.write(',\n  {"ph": "f", "id": %d, "pid": 0, "tid": %d, "ts": %.3f, "cat": "ac2g", "name": "ac2g", "bp": "e"}'
                % (corr, stream, ts))
        f.write(',\n  {"ph": "X", "cat": "kernel", "name": "%s", "pid": 0, "tid": %d, "ts": %.3f, "dur": %.3f,'
                ' "args": {"External id": %d, "queued": 0, "device": 0, "context": 1, "stream": %d,'
                ' "correlation": %d, "registers per thread": 128, "shared memory": 0, "blocks per SM": 1.5,'
                ' "warps per SM": 6.0, "grid": [132, 1, 1], "block": [384, 1, 1], "est. achieved occupancy %%": 9}}'
                % (name, stream, ts, dur, ext, stream, corr))
        ts_cpu += 6.0
        if n % 20000 == 0:
            f.write(',\n  {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#%d", "pid": 4000, "tid": 4001,'
                    ' "ts": %.3f, "dur": %.3f, "args": {"External id": 0}}' % (step, step_start, ts_cpu - step_start))
            step += 1
            step_start = ts_cpu
    f.write('\n  ],\n  "traceName": "synthetic"\n}\n')
print("%s: %d kernels, %d steps, %d bytes" % (out, n, step, size))
