"""``diagnose``: one example per signature of the catalog, each found by that signature alone
with every value of its fix filled, and the catalog's own checks."""

from __future__ import annotations

import re

import pytest

from test_diagnose import CORPUS, ids
from tpu_trainer.catalog.error_signatures import by_id, families, signatures
from tpu_trainer.plan.diagnose import diagnose
from tpu_trainer.plan.diagnose_score import load_corpus

pytestmark = pytest.mark.unit

# ---------------------------------------------------------------------------------------------
# One example per signature: each is found, by that signature alone, with every value filled
# ---------------------------------------------------------------------------------------------

EXAMPLES: dict[str, tuple[str, str]] = {
    "fsdp-indivisible": (
        "jax._src.sharding.IndivisibleError: Sharding NamedSharding(mesh=Mesh('fsdp': 64)) "
        "implies that array axis 0 is partitioned 64 times, but the dimension size is 13904 "
        "(full shape: (13904, 13904), per-dimension tiling factors: (64, 1) should evenly "
        "divide the shape)",
        "ici_data_parallelism=4",
    ),
    "fsdp-indivisible-legacy": (
        "ValueError: global size of its dimension 0 should be divisible by 8, but it is "
        "equal to 28",
        "ici_data_parallelism=2",
    ),
    "mesh-assignment": (
        "NotImplementedError: Failed to find assignment for logical_axis_index 5 of size 2\n"
        "with remaining assignable mesh [0, 4, 4, 0]",
        "`sequence` (older releases: `context`)",
    ),
    "hbm-oom-compile": (
        "RESOURCE_EXHAUSTED: E1000: CompileTimeHbmOom: Ran out of memory on HBM, the total "
        "memory required for HLO temporaries (112.90G) exceeds available HBM (94.74G).",
        "112.90G per device, 94.74G available (1.19×",
    ),
    "hbm-oom-legacy": (
        "RESOURCE_EXHAUSTED: XLA:TPU compile permanent error. Ran out of memory in memory "
        "space hbm. Used 20.50G of 15.48G hbm. Exceeded hbm capacity by 5.02G.",
        "Uses 20.50G of 15.48G",
    ),
    "vmem-oom": (
        "RuntimeError: Bad StatusOr access: RESOURCE_EXHAUSTED: XLA:TPU compile permanent "
        "error. Ran out of memory in memory space vmem. Used 32.42M of 16.00M vmem. Exceeded "
        "vmem capacity by 16.42M",
        "sa_block_q",
    ),
    "hbm-oom-runtime": (
        "RuntimeError: RESOURCE_EXHAUSTED: Attempting to allocate 31.06M. That was not "
        "possible. There are 58.64M free. Due to fragmentation, the largest contiguous region "
        "of free memory is 30.56M.; (0x0x0_HBM0)",
        "free memory is fragmented",
    ),
    "data-exhausted": ("StopIteration", "min_lines"),
    "maxtext-unknown-key": (
        "E0301 pyconfig.py:393] MAXTEXT CONFIG ERROR: 'lr' not in 'learning_rate', 'steps'.",
        "`learning_rate=`",
    ),
    "cpu-run-distributed": (
        '    process_id=int(os.environ.get("JOB_INDEX")),\n'
        "TypeError: int() argument must be a string, a bytes-like object or a real number, "
        "not 'NoneType'",
        "skip_jax_distributed_system=true",
    ),
    "optax-consistent-rms": (
        "TypeError: muon() got an unexpected keyword argument 'consistent_rms'",
        "optax",
    ),
    "jax-non-addressable": (
        "RuntimeError: Fetching value for `jax.Array` that spans non-addressable (non process "
        "local) devices is not possible.",
        "process_allgather",
    ),
    "tpu-vm-runtime-version": (
        "RuntimeError: Unable to initialize backend 'tpu': INTERNAL: Failed to get global TPU "
        "topology.",
        "--version=v2-alpha-tpuv6e",
    ),
    "libtpu-in-use": (
        "RuntimeError: Unable to initialize backend 'tpu': ABORTED: The TPU is already in use "
        "by process with pid 2718466. Not attempting to load libtpu.so in this process.",
        "kill 2718466",
    ),
    "tpu-device-permission": (
        "jaxlib._jax.XlaRuntimeError: UNKNOWN: TPU initialization failed: open(/dev/accel3): "
        "Operation not permitted: Operation not permitted; Couldn't open device: /dev/accel3",
        "sudo lsof -w /dev/accel3",
    ),
    "tpu-worker-addresses": (
        "RuntimeError: Bad StatusOr access: UNKNOWN: TPU initialization failed: Invalid "
        "--2a886c8_slice_builder_worker_addresses specified. Expected 4 worker addresses, got 1.",
        "--worker=all",
    ),
    "tpu-init-slow": (
        "UserWarning: TPU backend initialization is taking more than 60.0 seconds. Did you run "
        "your code on all TPU hosts?",
        "all workers",
    ),
    "jax-barrier-timeout": (
        "jaxlib.xla_extension.XlaRuntimeError: DEADLINE_EXCEEDED: Barrier timed out. "
        "Barrier_id: PjRT_Client_Connect. Timed out task names:",
        "JAX_COORDINATION_SERVICE_HEARTBEAT_TIMEOUT_SECONDS",
    ),
    "megascale-deadline": (
        "E0301 12:00:00.000 megascale_client.cc:210] DEADLINE_EXCEEDED: transfer to slice 1 "
        "did not finish within 300s",
        "--megascale_grpc_interface_prefixes",
    ),
    "megascale-hang-detected": (
        "E1124 06:07:31.204518 139872 megascale_hang_detector.cc:152] Megascale hang detected: "
        "Timed out waiting for 4 graphs to complete at launch_id 13650. Already completed: 100. "
        "StepGloballyInProgress: true. Timeout: 1m",
        "--megascale_abort_on_hangs=true",
    ),
    "trainer-progress-watchdog": (
        "I1124 06:40:00.000000 139872 trainer.py:430] Watchdog triggered because step has not "
        "incremented in the last 1800.0 seconds.",
        "thread stacks",
    ),
    "tpu-slice-health-check": (
        "E1124 05:58:10.000000 139872 tpu_health_check.py:96] Slice 1 health check failed due "
        "to program error.",
        "report-host-as-faulty",
    ),
    "megascale-slices-not-connected": (
        "E1124 06:01:02.000000 139872 topology_coordinator.cc:97] TopologyCoordinator: Unable "
        "to wait for all slices to connect",
        "--megascale_topology_discovery_timeout",
    ),
    "host-oom-killed": ("      Reason:       OOMKilled", "memory limit"),
    "host-allocation-warning": (
        "W tensorflow/tsl/framework/cpu_allocator_impl.cc:83] Allocation of 414988800 exceeds "
        "10% of free system memory.",
        "buffering",
    ),
    "xla-spawn-nprocs": ("WARNING:root:Unsupported nprocs (8), ignoring...", "xla_fsdp_v2"),
    "tunix-section-override": (
        "TypeError: RLTrainingConfig.__init__() missing 1 required positional argument: "
        "'eval_every_n_steps'",
        "complete section",
    ),
    "ray-tpu-head": (
        "(JaxTrainer pid=812) Failed to reserve TPU head for slice with shape: v4-32",
        "ray job stop",
    ),
    "xpk-configmap-missing": (
        "[XPK] Workload scheduling validation failed. XPK will not create the workload w1.",
        "kubectl patch configmap",
    ),
    "kueue-tpu-quota": (
        "Warning  Pending  3m  kueue-admission  couldn't assign flavors to pod set slice-job: "
        "insufficient quota for google.com/tpu in flavor 1xtpu7x-256, request > maximum "
        "capacity (256 > 128)",
        "nominalQuota for google.com/tpu in flavor 1xtpu7x-256",
    ),
    "kueue-cpu-memory-quota": (
        "Warning  Pending  4m23s  kueue-admission  couldn't assign flavors to pod set job: "
        "resource memory unavailable in ClusterQueue",
        "Remove memory from the ClusterQueue",
    ),
    "kueue-flavor": ("Kueue admission failed: flavor doesn't match", "ResourceFlavor"),
    "kueue-preempted": (
        "Message: Preempted to accommodate a workload (UID: abc-123, JobUID: job-456) due to "
        "prioritization in the ClusterQueue",
        "--priority=very-high",
    ),
    "jobset-max-restarts": (
        "Message: jobset failed due to reaching max number of restarts",
        "--max-restarts",
    ),
    "jobset-failed-jobs": (
        "Message: jobset failed due to one or more job failures",
        "tpu-trainer diagnose -",
    ),
    "image-pull": ("  Warning  Failed  12s  kubelet  Error: ImagePullBackOff", "artifactregistry"),
    "insufficient-tpu": (
        "0/8 nodes are available: 8 Insufficient\ngoogle.com/tpu. preemption: 0/8 nodes",
        "node-pools list",
    ),
    "node-affinity-mismatch": (
        "0/4 nodes are available: 4 node(s) didn't match Pod's node affinity/selector.",
        "--placement-policy",
    ),
    "untolerated-taint": (
        "0/1 nodes are available: 1 node(s) had untolerated taint {google.com/tpu: present}.",
        "toleration",
    ),
    "kubectl-container-name": (
        "error: a container name must be specified for pod w1-slice-job-0-0-abcde, choose one "
        "of: [jax-tpu-1 jax-tpu-2]",
        "kubectl logs w1-slice-job-0-0-abcde -c jax-tpu-1",
    ),
    "reservation-exhausted": (
        "[XPK] No available resources in reservation res-a",
        "next reservation",
    ),
    "capacity-stockout": (
        "Current errors: [GCE_STOCKOUT]: Instance 'gke-np-1' creation failed: The zone "
        "'projects/p/zones/us-central1-c' does not have enough resources available to fulfill "
        "the request.",
        "another zone",
    ),
    "reservation-wrong-zone": (
        "ERROR: (gcloud.beta.container.node-pools.create) ResponseError: code=400, "
        "message=Reservation is incorrect for the requested resources.",
        "--node-locations",
    ),
    "nodepool-already-exists": (
        "ERROR: (gcloud.container.node-pools.create) ResponseError: code=409, message=Already "
        "exists: projects/p/locations/us-central1/clusters/c/nodePools/np-tpu7x-64.",
        "node-pools delete np-tpu7x-64 ",
    ),
    "tpu7x-placement-invalid": (
        "ERROR: (gcloud.container.node-pools.create) INVALID_ARGUMENT: --placement-type "
        "COMPACT is not supported with machine type tpu7x-standard-4t",
        "workload-policy",
    ),
    "nodepool-machine-type": (
        "ERROR: (gcloud.container.node-pools.create) ResponseError: code=400, message=Machine "
        "type with name 'ct7x-4x4x8' does not exist in zone 'us-central1-ai1a'.",
        "tpu7x-standard-4t",
    ),
    "xpk-memory-limit": (
        "AttributeError: 'Namespace' object has no attribute 'memory_limit'",
        "gcloud beta container node-pools create",
    ),
    "k8s-resource-quota": (
        "message: 'exceeded quota: team-compute, requested: requests.cpu=96, used: "
        "requests.cpu=64, limited: requests.cpu=128'",
        "`kubectl edit resourcequota team-compute -n <namespace>`",
    ),
    "gcp-quota": (
        "ERROR: (gcloud.compute.tpus.tpu-vm.create) Quota 'TPUS_PER_TPU_FAMILY' exceeded. "
        "Limit: 0.0 in region us-east5.",
        "Request more TPUS_PER_TPU_FAMILY for region us-east5 (Console → IAM & Admin → "
        "Quotas; limit now 0.0)",
    ),
    "gcsfuse-mount": (
        'Warning  FailedMount  55s  kubelet  MountVolume.SetUp failed for volume "gcs-fuse-csi-'
        'ephemeral" : rpc error: code = PermissionDenied desc = the sidecar container failed '
        "with error: mountWithArgs: mountWithStorageHandle",
        "GcsFuseCsiDriver=ENABLED",
    ),
    "preempted-or-maintenance": (
        "ERROR: TPU t1 in zone us-central2-b is PREEMPTED; the workers lost their slice",
        "enable_checkpointing=true",
    ),
    "sharding-generic": (
        "jax._src.sharding_impls.IndivisibleError: NamedSharding(mesh=Mesh('fsdp': 3), "
        "spec=PartitionSpec('fsdp',)) is not divisible for this array",
        "allow_split_physical_axes=true",
    ),
    "nodepool-create-rejected": (
        "ERROR: (gcloud.container.node-pools.create) ResponseError: code=400, message=Node "
        "pools of this cluster must be in zone us-central1-a.",
        "tpu-trainer slice",
    ),
    "xpk-error": (
        "[XPK] Cluster demo does not exist in us-central1, Exiting XPK",
        "--dry-run",
    ),
    "gcs-permission": (
        "google.api_core.exceptions.Forbidden: 403 POST https://storage.googleapis.com/upload/"
        "storage/v1/b/demo/o: trainer@p.iam.gserviceaccount.com does not have "
        "storage.objects.create access to the Google Cloud Storage object.",
        "roles/storage.objectAdmin",
    ),
    "webhook-denied": (
        'Error from server (Forbidden): error when creating "run.yaml": admission webhook '
        '"vjobset.kb.io" denied the request: spec.replicatedJobs[0].replicas: Invalid value: -1',
        "The webhook vjobset.kb.io said: spec.replicatedJobs[0].replicas",
    ),
    "maxtext-config-constraint": (
        "ValueError: num_pipeline_microbatches must be positive",
        "The check says: num_pipeline_microbatches must be positive",
    ),
    "memory-generic": (
        "E0102 03:04:05.1 7 trainer.py:9] Device memory exceeded while running the step",
        "The message: Device memory exceeded while running the step",
    ),
    "coordination-generic": (
        "E0102 03:04:05.1 7 w.py:1] all-reduce across 64 peers timed out after 600s",
        "The message: all-reduce across 64 peers timed out",
    ),
    "data-exhausted-generic": (
        "RuntimeError: input pipeline ran out of batches at step 812",
        "The message: input pipeline ran out of batches",
    ),
    "kueue-generic": (
        "Warning  Pending  ClusterQueue team-a rejected the workload: cohort limit exceeded",
        "The message: ClusterQueue team-a rejected the workload",
    ),
    "capacity-generic": (
        "Error: insufficient TPU capacity in us-east5-b for v6e-256",
        "The message: insufficient TPU capacity in us-east5-b",
    ),
    "quota-generic": (
        "Error: project quota for TPU v5p chips exceeded in us-east5",
        "The message: quota for TPU v5p chips exceeded",
    ),
    "tpu-create-generic": (
        "ERROR: (gcloud.compute.tpus.tpu-vm.create) UNKNOWN: the service is not ready",
        "gcloud said: UNKNOWN: the service is not ready",
    ),
    "image-generic": (
        "Error: image us-docker.pkg.dev/p/r/trainer:v2 does not exist",
        "The message: image us-docker.pkg.dev/p/r/trainer:v2 does not exist",
    ),
    "native-crash": (
        "*** SIGSEGV (@0x0), see gl__________41#s15 received by PID 77 (TID 78) on cpu 1; "
        "stack trace: ***",
        "pip install -U",
    ),
    "tpu-failure-generic": (
        "E0102 03:04:05.000001 77 tpu_driver.cc:42] TPU chip health check failed on host w-3",
        "The runtime said: TPU chip health check failed on host w-3",
    ),
    "tpu-chip-fatal": (
        "E0102 03:04:05.000001 77 synchronous_driver.cc:820] [/dev/accel3 tpu7:pe0:3] "
        "!!!! FATAL ERROR !!!! for [/dev/accel3 tpu7:pe0:3]",
        "kubectl cordon",
    ),
    "tpu-connection-reset": (
        "jax.errors.JaxRuntimeError: UNAVAILABLE: TPU worker 10.130.0.7:8471 returned "
        "Connection reset by peer",
        "--max-error-retries N",
    ),
    "tpu-configuration-unsupported": (
        "Current errors: [CONDITION_NOT_MET]: Instance 'gke-tpu-np-3f2a' creation failed: "
        "Invalid resource usage: 'Unsupported TPU configuration'.",
        "gcloud compute tpus accelerator-types list",
    ),
    "ip-space-exhausted": (
        "Current errors: [IP_SPACE_EXHAUSTED]: Instance 'gke-tpu-np-9' creation failed: IP space "
        "of 'projects/p/regions/us-east5/subnetworks/tpu-subnet' is exhausted.",
        "--additional-pod-ipv4-ranges",
    ),
    "jobset-exclusive-placement": (
        "  Warning  ExclusivePlacementViolation  jobset-controller  Pod violated JobSet "
        "exclusive placement policy",
        "its own node pool",
    ),
    "node-admission-rejected": (
        "Pod was rejected: Node didn't have enough resource: google.com/tpu, requested: 4, "
        "used: 4, capacity: 4",
        "See what holds google.com/tpu on the node",
    ),
    "pod-evicted": (
        "  Warning  Evicted  2m  kubelet  The node was low on resource: ephemeral-storage. "
        "Threshold quantity: 10Gi, available: 1Gi. Container jax-tpu was using 95Gi, request is "
        "0, has larger consumption of ephemeral-storage.",
        "ephemeral-storage",
    ),
    "gcp-api-disabled": (
        "ERROR: (gcloud.compute.tpus.tpu-vm.create) PERMISSION_DENIED: Cloud TPU API has not "
        "been used in project tpu-lab-7 before or it is disabled.",
        "gcloud services enable tpu.googleapis.com container.googleapis.com "
        "compute.googleapis.com --project=tpu-lab-7",
    ),
    "torch-xla-runtime-initialized": (
        "RuntimeError: Runtime is already initialized. Do not use the XLA device before calling "
        "xmp.spawn.",
        "only inside the function passed to xmp.spawn",
    ),
    "tpu-metadata-fetch-failed": (
        "requests.exceptions.HTTPError: 404 Client Error: Not Found for url: "
        "http://metadata.google.internal/computeMetadata/v1/instance/attributes/tpu-env",
        "computeMetadata/v1/instance/attributes/tpu-env`",
    ),
    "cloud-tpu-client": (
        'RuntimeError: TPU "tpu-a" is not yet ready; state: "REPAIRING"',
        "tpu-vm describe tpu-a --zone=<zone>` (state READY, health HEALTHY; it was REPAIRING)",
    ),
    "gcsfuse-mount-error": (
        "daemonize.Run: readFromProcess: sub-process: mountWithArgs: mountWithConn: "
        'fs.NewServer: SetUpBucket: OpenBucket: Unknown bucket "ckpt-eu"',
        "fusermount -u <dir>",
    ),
    "cluster-operation-in-progress": (
        "ResponseError: code=400, message=Operation operation-1700-ab12 is currently upgrading "
        "cluster tpu-c1. Please wait and try again once it is done.",
        "gcloud container operations wait operation-1700-ab12",
    ),
    "node-unreachable": (
        "  Ready   Unknown   NodeStatusUnknown   Kubelet stopped posting node status.",
        "kubectl describe node <node>",
    ),
    "nodepool-error-state": (
        'Error: NodePool pool-v6e was created in the error state "ERROR"',
        "gcloud container node-pools delete pool-v6e",
    ),
    "gcluster-blueprint-invalid": (
        "Error: deployment variable zone was not set",
        "--vars zone=<value>",
    ),
    "tpu-metadata-unavailable": (
        "I0000 00:00:1700000000.000001    1337 common_lib.cc:174] Failed to fetch URL on try 6 "
        "out of 6: Failed to fetch URL (http status: 404) No error",
        "TPU_ACCELERATOR_TYPE",
    ),
    "api-rate-limit": (
        "googleapi: Error 403: Quota exceeded for quota group 'WriteGroup' and limit 'Write "
        "requests per 100 seconds' of service 'compute.googleapis.com' for consumer "
        "'project_number:4242'., rateLimitExceeded",
        "--service=compute.googleapis.com",
    ),
    "gke-version-unsupported": (
        "ERROR: (gcloud.container.clusters.create) ResponseError: code=400, message=Master "
        'version "1.27.3-gke.100" is unsupported.',
        "gcloud container get-server-config",
    ),
    "service-account-missing": (
        'googleapi: Error 400: Service account "777-compute@developer.gserviceaccount.com" '
        "does not exist., badRequest",
        "gcloud iam service-accounts list",
    ),
    "autoscaler-cluster-unhealthy": (
        "W1124 10:01:02.000000       1 static_autoscaler.go:430] Cluster is not ready for "
        "autoscaling: wrong number of nodes for node group: gke-np-1 expected: 4 actual: 3",
        "cluster-autoscaler-status",
    ),
    "tpu-not-found": (
        "ERROR: (gcloud.compute.tpus.tpu-vm.ssh) NOT_FOUND: Resource "
        "'projects/p/locations/europe-west4-a/nodes/run-7' was not found",
        "tpu-vm list --zone=europe-west4-a",
    ),
    "hf-gated-repo": (
        "huggingface_hub.errors.GatedRepoError: 401 Client Error. Cannot access gated repo for url "
        "https://huggingface.co/acme/tiny-7b/resolve/main/config.json.",
        "HF_TOKEN",
    ),
    "gcsfuse-sidecar-terminated": (
        'rpc error: code = ResourceExhausted desc = the "gke-gcsfuse-sidecar" container '
        "terminated due to Error, exit code: 1",
        "kubectl logs <pod> -c gke-gcsfuse-sidecar --previous",
    ),
    "gcsfuse-volume-attribute": (
        "rpc error: code = InvalidArgument desc = volume attribute skipCSIBucketAccessCheck only "
        'accepts a valid bool value, got "yes"',
        "volumeAttributes",
    ),
    "torch-rendezvous-timeout": (
        "torch.distributed.DistStoreError: Timed out after 601 seconds waiting for clients. "
        "7/8 clients joined.",
        "MASTER_PORT",
    ),
    "xpk-manifest-yaml": (
        "error: error parsing /tmp/tmpw1k2ab9c: error converting YAML to JSON: yaml: line 52: "
        "mapping values are not allowed in this context",
        "--env-file",
    ),
    "gcluster-version-changed": (
        'Error: gcluster_version has changed from "v1.40.0" to "v1.41.2", using different '
        "versions of gcluster to update a live deployment is not officially supported",
        "v1.40.0",
    ),
    "autoscaler-limits-reached": (
        'all available instance types exceed limits for nodepool "tpu-pool"',
        "--max-nodes",
    ),
    "kubectl-no-cluster": (
        "The connection to the server localhost:8080 was refused - did you specify the right "
        "host or port?",
        "gcloud container clusters get-credentials",
    ),
    "kubectl-manifest-yaml": (
        "error: error parsing jobset.yaml: error converting YAML to JSON: yaml: line 7: did not "
        "find expected key",
        "kubectl apply --dry-run=client",
    ),
    "io-error-on-mount": (
        "OSError: [Errno 5] Input/output error: '/gcs/train/shard-00003.array_record'",
        "gke-gcsfuse-sidecar",
    ),
    "sparsecore-oom": (
        "INTERNAL: Failed to run pass pipeline. error: 'memref.alloca' op current allocation offset "
        "upper bound (98304 words) exceeds the legitimate user allocatable offset upper bound "
        "(65535 words) in memory space 202 when allocating 4096 words.",
        "max_ids_per_partition",
    ),
    "remat-memory-warning": (
        "W external/xla/xla/service/hlo_rematerialization.cc:3005] Can't reduce memory use below "
        "15.48GiB (16622812364 bytes) by rematerialization; only reduced to 21.02GiB (22570000000 "
        "bytes), down from 21.10GiB (22650000000 bytes) originally",
        "21.02GiB",
    ),
    "mosaic-compile-failed": (
        "jax.errors.JaxRuntimeError: INTERNAL: Mosaic failed to compile TPU kernel: failed to "
        "legalize operation 'tpu.matmul'",
        "sa_block_q",
    ),
    "multihost-pool-resize": (
        "ERROR: (gcloud.container.clusters.resize) ResponseError: code=501, message=Multi-host TPU "
        "pool (tpu-v5p-pool) manual resize is not supported.",
        "tpu-v5p-pool",
    ),
    "iap-tunnel-refused": (
        "ERROR: (gcloud.compute.start-iap-tunnel) Error while connecting [4003: 'failed to "
        "connect to backend'].",
        "35.235.240.0/20",
    ),
    "gcloud-arguments": (
        "ERROR: (gcloud.compute.tpus.tpu-vm.create) unrecognized arguments: --topology=4x4",
        "gcloud.compute.tpus.tpu-vm.create",
    ),
    "ray-resources-waiting": (
        "(autoscaler +41s) Warning: The following resource request cannot be scheduled right "
        "now: {'TPU': 4.0, 'CPU': 1.0}. This is likely due to all cluster resources being claimed "
        "by actors.",
        "ray status",
    ),
    "ray-autoscaler-waiting": (
        "(autoscaler +1m3s) Error: No available node types can fulfill resource requests "
        "{'TPU': 8.0, 'CPU': 1.0}*2. Add suitable node types to this cluster to resolve this issue.",
        "maxReplicas",
    ),
    "kueue-workload-waiting": (
        "Warning  ErrWorkloadCompose  9s  pod-kueue-controller  'train-group' group has fewer "
        "runnable pods than expected",
        "pod-group-total-count",
    ),
    "heads-indivisible": (
        "ValueError: Total number of attention heads (20) must be divisible by tensor parallel "
        "size (8).",
        "divides the head count (20)",
    ),
    "api-rate-limit-retry": (
        "W0102 11:02:03.000001 1 http.py:171] Sleeping 3.12 seconds before retry 2 of 5 for "
        "request: POST https://tpu.googleapis.com/v2/projects/p/locations/us-east5-b/nodes?alt=json,"
        " after 429",
        "gcloud alpha services quota list",
    ),
    "nodes-not-registered": (
        "Error: error creating NodePool: All cluster resources were brought up, but: only 2 nodes "
        "out of 4 have registered; cluster may be unhealthy.",
        "roles/container.defaultNodeServiceAccount",
    ),
    "org-policy-violated": (
        "Instance 'gke-tpu-np-abc' creation failed: Constraint constraints/compute.requireShieldedVm"
        " violated for project my-proj.",
        "describe constraints/compute.requireShieldedVm --project=my-proj --effective",
    ),
    "maintenance-policy-unsupported": (
        "ERROR: (gcloud.compute.instances.create) Could not fetch resource: - n2d instances do not "
        "support onHostMaintenance=TERMINATE unless they are preemptible.",
        "with n2d machines",
    ),
    "kubectl-type-unknown": (
        'error: the server doesn\'t have a resource type "train-job-7f9c4d8b6-x2k9q"',
        "kubectl describe pod <name>",
    ),
    "tpu-flex-start-unsupported": (
        'ERROR: (gcloud.alpha.compute.tpus.queued-resources.create) {"code": 3, "message": '
        '"FLEX_START provisioning model is not supported for accelerator type \\"v6e-8\\" in '
        'location \\"asia-east1-c\\""}',
        "without `--provisioning-model=flex-start`",
    ),
    "gke-auth-plugin-missing": (
        'panic: no Auth Provider found for name "gcp"',
        "gcloud components install gke-gcloud-auth-plugin",
    ),
}


def test_unit_every_signature_has_an_example_or_a_corpus_text() -> None:
    covered = set(EXAMPLES) | {
        m.signature for entry in load_corpus(CORPUS) for m in diagnose(entry.text.splitlines())
    }
    assert {s.id for s in signatures()} <= covered


@pytest.mark.parametrize("signature", sorted(EXAMPLES))
def test_unit_example_is_found_by_its_signature_alone(signature: str) -> None:
    text, expected = EXAMPLES[signature]
    matches = diagnose(text.split("\n"))
    assert ids(matches) == [signature]
    (m,) = matches
    assert m.line == 1
    assert m.severity == by_id(signature).severity
    assert expected in m.fix, m.fix
    assert not re.search(r"\{[A-Za-z_]\w*\}", m.cause + m.fix), "unfilled placeholder"


@pytest.mark.parametrize(
    ("line", "said"),
    [
        (
            "ValueError: Number of devices 8 must equal the product of mesh_shape (4, 4)",
            "The job sees 8 devices for mesh (4, 4). Make",
        ),
        (
            "ValueError: Requested number of devices to run the executable on (8) doesn't match "
            "the compiler estimated number of devices (4)",
            "The program wants 4 devices and the job has 8. Make",
        ),
        ("AttributeError: 'TpuDevice' object does not have attribute slice_index", "Make"),
    ],
)
def test_unit_a_mesh_fix_says_only_what_its_line_told(line: str, said: str) -> None:
    (m,) = diagnose([line])
    assert m.signature == "mesh-device-count"
    assert m.fix.startswith(said), m.fix
    assert "<" not in m.fix.split("`")[0], "an unfilled value before the first command"


@pytest.mark.parametrize(
    ("line", "said"),
    [
        (
            "FATAL Flags parsing error: Unknown command line flag 'xla_tpu_enable_foo'",
            "drop an XLA or libtpu flag (`xla_tpu_enable_foo`) the installed",
        ),
        (
            "ValueError: Failed to deserialize the Mosaic module: INTERNAL: Unsupported version: "
            "expected <= 7 but got 8",
            "drop an XLA or libtpu flag the installed",
        ),
    ],
)
def test_unit_a_runtime_mismatch_names_a_flag_only_when_its_line_does(line: str, said: str) -> None:
    (m,) = diagnose([line])
    assert m.signature == "tpu-runtime-mismatch"
    assert said in m.fix and "<flag>" not in m.fix, m.fix


def test_unit_hydra_wrapping_a_constructors_error_is_not_a_config_refusal() -> None:
    refused = diagnose(["hydra.errors.ConfigCompositionException: Could not load 'model/x'"])
    assert [m.signature for m in refused] == ["maxtext-config-error"]
    wrapped = "hydra.errors.InstantiationException: Error in call to target 'net.Model': boom"
    assert all(m.signature != "maxtext-config-error" for m in diagnose([wrapped]))


def test_unit_catalog_is_well_formed() -> None:
    names = [s.id for s in signatures()]
    assert len(names) == len(set(names))
    assert len(signatures()) >= 70
    family_ids = {f.id for f in families()}
    assert len(family_ids) >= 17
    for sig in signatures():
        assert re.fullmatch(r"[a-z0-9]+(?:-[a-z0-9]+)*", sig.id), sig.id
        assert sig.family in family_ids, sig.id
        assert sig.severity in ("fatal", "warning")
        assert sig.specificity in (1, 2, 3)
        assert sig.needles and all(n == n.lower() and n for n in sig.needles), sig.id
        assert sig.title and sig.cause and sig.fix and sig.source
        assert sig.source.startswith(("seed ", "shared design", "https://")), sig.id


def test_unit_issue_sourced_signatures_cite_public_issues() -> None:
    urls = {
        url
        for sig in signatures()
        for url in re.findall(r"https://github\.com/\S+/(?:issues|pull)/\d+", sig.source)
    }
    issue_signatures = [s for s in signatures() if "https://github.com/" in s.source]
    assert len(issue_signatures) >= 12
    assert len(urls) >= 12
