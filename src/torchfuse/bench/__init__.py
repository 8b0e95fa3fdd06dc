"""The benchmark harness: torchfuse against eager and ``torch.compile``, side by side.

It reproduces the figures of the nvFuser announcement (HuggingFace and TIMM training with AMP
and a fused AdamW; TIMM inference at batch 1 and 8 with CUDA graphs, channels-first and
channels-last) and measures every backend in the same process, one after another on the same
inputs, timed in interleaved rounds. Run it with ``torchfuse bench`` or
``python -m torchfuse.bench``; ``benchmarks/README.md`` says how to run the suites in short
shards and merge them.

Modules, in the order data flows through them:

=================  =====================================================================
``suites/``        the cases: ``micro``, ``hf``, ``timm`` (TIMM and torchvision), ``seed``
``workload``       Case, Workload, BuildContext
``modes``          training and inference modes and their precisions
``backends``       the table of backends compared (one entry each)
``steps``          one backend's copy of a workload and the step it times
``timing``         CUDA-event timing, interleaved rounds, memory, kernel launches
``accuracy``       the check against eager and float64 (``torch._dynamo.utils.same``)
``runner``         one case across all backends; a whole run under a time budget
``coldstart``      first-call time in fresh processes, cold and warm caches
``results``        the result record; run files; merging runs
``environment``    device, versions, precision settings and command of a run
``report``         terminal table and ``summary.md``; ``charts``: the PNG bar charts
``errors``         failures and warnings as recorded text
``cli``            the command line (``__main__`` calls it)
=================  =====================================================================
"""
