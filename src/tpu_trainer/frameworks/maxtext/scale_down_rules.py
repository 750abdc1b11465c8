"""What a MaxText 0.2.5 recipe argument means for a run on this machine's CPU, as data.

Found by reading MaxText 0.2.5's ``base.yml`` and model code and by running the tpu-recipes
Ironwood recipes scaled down on a CPU: what is listed here failed there or needs something a
CPU does not have; everything else a recipe gives runs on a CPU and is kept (tried: remat
policies with ``offload`` tensors, fp8_full quantization with qwix, splash block sizes with
dot_product attention, Hugging Face and tiktoken tokenizer settings with synthetic data).
"""

from __future__ import annotations

from types import MappingProxyType

ATTENTION_PERIODS: MappingProxyType[str, int] = MappingProxyType(
    {
        # model_name or decoder_block -> layers in one cycle of its local/global attention
        "gemma4-e2b": 5,  # 4 sliding + 1 global
        "gemma4_small": 6,  # e4b: 5 sliding + 1 global
        "gemma4": 6,
        "gemma3": 6,
        "olmo3": 4,
        "gpt_oss": 2,  # sliding, global
    }
)

TPU_ATTENTION = frozenset(
    # kernels that refuse a CPU (`flash` is Pallas splash on TPU, a tokamax GPU kernel
    # elsewhere: "NotImplementedError: Not supported on cpu")
    {"flash", "cudnn_flash_te", "cudnn_flash_jax", "vllm_rpa", "vllm_batched_rpa", "paged"}
)
CPU_ATTENTION = "dot_product"
"""The attention MaxText itself picks on a CPU (``autoselected``); splash settings (sa_*)
are kept: dot_product ignores them and MaxText still checks their names and types."""

GPU_QUANTIZATION = frozenset(
    # GPU-only schemes; fp8_full (qwix) runs on a CPU, and it and the other modes are kept
    {
        "fp8",
        "nanoo_fp8",
        "fp8_nanoo",
        "fp8_gpu",
        "te_no_quant",
        "te_fp8_delayedscaling",
        "te_fp8_currentscaling",
        "te_mxfp8",
        "te_nvfp4",
        "te_nvfp4_no_rht",
    }
)

CPU_KERNEL_SWITCHES: MappingProxyType[str, str] = MappingProxyType(
    {
        # true on a TPU, turned off here: why
        "megablox": "its Pallas grouped matmul runs interpreted on a CPU (seconds per step) "
        "and its tiles must divide the scaled widths; jax ragged_dot computes the same",
        "use_tokamax_gmm": "the tokamax grouped matmul asks for the TPU generation "
        "(ValueError: Unsupported TPU device kind: cpu)",
        "use_gmm_v2": "a tokamax TPU kernel",
        "use_ragged_sort": "a Pallas TPU kernel",
        "use_gather_mosaic_kernel": "a Mosaic TPU kernel",
        "use_mhc_pallas_kernel": "a Pallas TPU kernel",
        "use_csa_streamindex_kernel": "a Pallas TPU kernel",
        "use_ring_of_experts": "needs expert parallelism across chips",
        "moe_pin_sparse_core_all_gathers": "TPU SparseCores",
        "moe_pin_sparse_core_ep_all_gathers": "TPU SparseCores",
        "moe_pin_sparse_core_fsdp_all_gathers": "TPU SparseCores",
        "te_moe_block": "TransformerEngine (GPU)",
        "optimize_mesh_for_tpu_v6e": "a TPU v6e mesh layout",
    }
)

CLOUD_SWITCHES = frozenset(
    {
        "gcs_metrics",
        "save_config_to_gcs",
        "enable_goodput_recording",
        "monitor_goodput",
        "enable_pathways_goodput",
        "use_vertex_tensorboard",
        "managed_mldiagnostics",
        "enable_checkpoint_cloud_logger",
        "report_heartbeat_metric_for_gcp_monitoring",
        "report_performance_metric_for_gcp_monitoring",
        "colocated_python_data_input",
        "colocated_python_checkpointing",
        "enable_single_controller",
    }
)

TOPOLOGY_KEYS = frozenset(
    {
        "compile_topology",
        "compile_topology_num_slices",
        "num_slices",
        "custom_mesh",
        "subslice_shape",
        "internal_compile",
        "internal_compile_num_devices",
        "num_pipeline_microbatches",
    }
)

PROFILER_KEYS = frozenset(
    {
        "profiler",
        "profiler_steps",
        "skip_first_n_steps_for_profiler",
        "profile_periodically_period",
        "upload_all_profiler_results",
        "profile_power_events",
        "enable_tpu_profiling_options",
    }
)
PROFILER_PREFIXES = ("xprof_", "tpu_num_")

DATA_KEYS = frozenset(
    {
        "dataset_path",
        "dataset_name",
        "eval_dataset_name",
        "train_split",
        "eval_split",
        "expansion_factor_real_data",
    }
)
DATA_PREFIXES = ("hf_", "grain_", "olmo_", "mmap_", "blend_")

LAUNCHER_KEYS = frozenset(
    # set by the local launcher itself
    {"run_name", "base_output_directory", "hardware", "skip_jax_distributed_system"}
)
