"""The benchmark harness: torchfuse against eager and ``torch.compile``, side by side.

Its suites reproduce the figures of the nvFuser announcement (HuggingFace and TIMM training
with AMP and a fused AdamW; TIMM inference at batch 1 and 8 with CUDA graphs, channels-first
and channels-last) and measure every backend in the same process, one after another on the
same inputs, timed in interleaved rounds; its other subcommands measure single kernels (the
norm table, launch sweeps, SASS counts) and where time goes (profiles, host costs). Every
measurement becomes a row of one rows file, and the current charts are regenerated from the
rows; GPU runs are named in ``benchmarks/runs.toml``. Run it with ``torchfuse bench`` or
``python -m torchfuse.bench``; ``benchmarks/README.md`` says how.

Modules, in the order data flows through them:

==================  =====================================================================
``suites/``         the cases of the step suites: ``micro``, ``hf``, ``timm``, ``seed``
``workload``        Case, Workload, BuildContext
``modes``           training and inference modes and their precisions
``backends``        the table of backends compared (one entry each)
``steps``           one backend's copy of a workload and the step it times
``timing``          the one timer (CUDA events, CUDA-graph replays, the host clock, the
                    profiler) and the one device-copy bandwidth
``accuracy``        the check against eager and float64 (``torch._dynamo.utils.same``)
``runner``          one case across all backends; a whole run under a time budget
``coldstart``       first-call time in fresh processes, cold and warm caches
``variants``        the one place where a variant's overrides reach the compiler
``norms``           the norm table (``norm_sweeps``: its named variant sweeps)
``launch_sweeps``   a fusion group's kernel under other launch configurations
``profiles``        a training step or inference call, kernel by kernel
``host``            host time per call, per launch, per CUDA-graph replay
``conv_epilogue``   cuDNN's fused convolution epilogues against torchfuse's kernels
``sass``            instructions and registers of kernels compiled for sm_90, without a GPU
``results``         the step suites' result record; run files; merging runs
``rows``            results as appended data rows: the one rows file
``tables``          the current charts and tables, regenerated from the rows
``named_runs``      the named GPU runs of ``benchmarks/runs.toml``
``environment``     device, versions, precision settings and command of a run
``report``          terminal table and ``summary.md``; ``charts``: the PNG bar charts
``errors``          failures and warnings as recorded text
``cli``             the command line and its subcommands (``__main__`` calls it)
==================  =====================================================================
"""
