"""Make the cluster ready for a run: find or create a RUNNING node pool per slice, from the
configured reservations in priority order, and return the zone to submit to."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from tpu_trainer.app.display import Display
from tpu_trainer.config.model import Config
from tpu_trainer.errors import TpuTrainerError
from tpu_trainer.infra.gcloud import (
    Cluster,
    Gcloud,
    NodePool,
    Reservation,
    created_pool,
    is_already_exists,
)
from tpu_trainer.infra.gcloud_errors import FIXES, classify
from tpu_trainer.infra.kubectl import Kubectl
from tpu_trainer.infra.runner import CommandFailed, CommandResult
from tpu_trainer.infra.xpk import Xpk, cluster_adapt_argv
from tpu_trainer.launchers.gke.capacity import MOVE_ON, Choice, Outcome, Survey, Verdict, order
from tpu_trainer.launchers.gke.node_pools import (
    Attempt,
    CapacityError,
    PoolInError,
    Provisioned,
    last_line,
    matching_pools,
    wait_running,
)
from tpu_trainer.launchers.gke.nodepool import (
    NodePoolRequest,
    gcloud_create_argv,
    machine_types,
    tool_pool_name,
)
from tpu_trainer.plan.slices import Slice
from tpu_trainer.store.db import ResourceState, RunStore


@dataclass
class Provisioner:
    gcloud: Gcloud
    xpk: Xpk
    kubectl: Kubectl
    store: RunStore
    run_id: str
    config: Config
    slice: Slice
    num_slices: int
    display: Display
    poll_seconds: float = 30.0
    provisioning_timeout_s: float = 4 * 3600.0
    attempts: list[Attempt] = field(default_factory=list)
    cluster: Cluster | None = None
    """The cluster as the prerequisites found it (not asked for again)."""
    pools: list[NodePool] | None = None
    """Its node pools as the prerequisites found them, before the run (not asked for again)."""
    policy_ready: bool = False
    """The workload policy is known to exist (asked or made once per run, not per attempt)."""
    project_number: str | None = None
    """Handed to xpk (``--project-number``), so it does not ask Resource Manager itself."""
    reservations: list[Reservation | None] | None = None
    """The configured reservations as the prerequisites found them (the first survey uses
    them instead of asking again)."""
    kueue_ready: bool = False
    """Kueue was read while deciding on adapt and lacked nothing for the slice (nothing has
    changed it since: the configure stage need not read it again)."""
    adapt_settled: bool = False
    """Whether xpk cluster adapt is settled for this run: it ran (it configures Kueue; xpk 1.x
    makes no node pool), or it must not or need not run. Later reservations go straight to the
    gcloud create, without asking again."""
    adapt_with_xpk: bool = True
    """The submitter's users have xpk (:class:`~.submitter.KueueNeeds`); without it every pool
    is made with gcloud and Kueue is configured by the tool alone."""

    # ---- entry point ------------------------------------------------------------------
    def ensure(self) -> Provisioned:
        cfg = self.config
        cluster = self.cluster or self.gcloud.cluster(cfg.cluster_name, cfg.region)
        if cluster is None:
            raise TpuTrainerError(
                f"cluster {cfg.cluster_name} not found in {cfg.region} (project {cfg.project_id})",
                fix="check cluster_name/region in the configuration, or create the cluster with "
                "`xpk cluster create`",
            )
        pools = self.pools
        if pools is None:
            pools = self.gcloud.node_pools(cfg.cluster_name, cfg.region)
        self.store.update_run(self.run_id, pools_before=[p.name for p in pools])
        existing = self._usable_existing(pools)
        if existing is not None:
            return existing
        return self._create(pools, cluster.node_version)

    def _usable_existing(self, pools: list[NodePool]) -> Provisioned | None:
        """Matching pools that are RUNNING (or on their way), one per slice, all in one zone."""
        by_zone: dict[str, list[NodePool]] = {}
        for pool in matching_pools(pools, self.slice, self.config.machine_type):
            if pool.status == "ERROR":
                self.display.warn(
                    f"node pool {pool.name} matches {self.slice} but is in ERROR; it was not "
                    f"made by this run, so it is left alone (delete it with `gcloud container "
                    f"node-pools delete {pool.name} --cluster={self.config.cluster_name} "
                    f"--region={self.config.region} --quiet`)"
                )
                continue
            if pool.status not in ("RUNNING", "PROVISIONING", "RECONCILING"):
                continue
            zone = pool.zones[0] if pool.zones else self.config.default_zone
            group = by_zone.setdefault(zone, [])
            group.append(pool)
            if len(group) == self.num_slices:
                return self._reuse(group, zone)
        if by_zone:
            found = ", ".join(p.name for group in by_zone.values() for p in group)
            self.display.info(
                f"{self.num_slices} slices need {self.num_slices} matching node pools in one "
                f"zone; only {found} exist: creating {self.num_slices} new ones"
            )
        return None

    def _reuse(self, group: list[NodePool], zone: str) -> Provisioned:
        for pool in group:
            if pool.status == "RUNNING":
                self.display.info(f"node pool {pool.name} ({zone}) already runs {self.slice}")
            else:
                self.display.info(f"node pool {pool.name} is {pool.status}; waiting for it")
                self._wait_running(pool.name)
        names = [p.name for p in group]
        return Provisioned(names[0], zone, created=False, attempts=self.attempts, pools=names)

    # ---- capacity ---------------------------------------------------------------------
    def survey(self) -> list[Choice]:
        """Ask for every configured reservation at once (one ``reservations list``): its zone,
        status, health and free hosts."""
        refs = self.config.reservations
        found, self.reservations = self.reservations, None  # asked for once: later, again
        if found is None or len(found) != len(refs):
            found = self.gcloud.reservations([(ref.name, ref.zone) for ref in refs])
        surveys = [
            Survey(ref.name, ref.zone, None, None, found=False)
            if res is None
            else Survey(
                res.name,
                res.zone or ref.zone,
                res.status,
                res.free_hosts,
                health=res.health,
                degraded_blocks=res.degraded_blocks,
            )
            for ref, res in zip(refs, found, strict=True)
        ]
        return order(surveys, self.slice.hosts * self.num_slices, self.config.region)

    def _note(self, choice: Choice, outcome: Outcome | Verdict, message: str = "") -> None:
        s = choice.survey
        attempt = Attempt(s.name, s.zone, s.status, s.free_hosts, outcome.value, message)
        self.attempts.append(attempt)
        self.store.record_attempt(
            self.run_id,
            reservation=s.name,
            zone=s.zone,
            status=s.status,
            free_hosts=s.free_hosts,
            needed_hosts=self.slice.hosts * self.num_slices,
            outcome=outcome.value,
            message=message,
        )
        state = ", ".join(x for x in (s.status, s.health) if x) or "?"
        shown = f"{s.name} ({s.zone or '?'}, {state}, free hosts {s.free_hosts})"
        self.display.info(f"reservation {shown}: {outcome.value} {message}".rstrip())

    def _create(self, pools: list[NodePool], node_version: str) -> Provisioned:
        if not self.config.reservations:
            raise CapacityError(
                "no reservations configured",
                fix="add `reservations: [name, ...]` to the configuration",
            )
        for choice in self.survey():
            if not choice.usable:
                self._note(choice, choice.verdict, choice.detail)
                continue
            made = self._try(choice, pools, node_version)
            if made is not None:
                return made
        lines = "\n".join(
            f"  {a.reservation} ({a.zone or '?'}): {a.outcome} {a.message}".rstrip()
            for a in self.attempts
        )
        raise CapacityError(
            f"no reservation could provide {self.slice} x{self.num_slices} "
            f"({self.slice.hosts * self.num_slices} hosts):\n{lines}",
            fix="add or free a reservation, or wait for capacity and run again (the teardown "
            "above says whether anything of this run is left)",
        )

    def _try(self, choice: Choice, pools: list[NodePool], node_version: str) -> Provisioned | None:
        """One reservation: let xpk configure the cluster where that is needed and safe (once
        per run), then create the node pools with gcloud (xpk 1.x ``cluster adapt`` makes
        none)."""
        zone = choice.survey.zone or self.config.default_zone
        if self.adapt_with_xpk and not self.adapt_settled:
            # Kueue is read while the workload policy is asked for (and made): neither waits
            with ThreadPoolExecutor(max_workers=1) as pool:
                wanted = pool.submit(self._adapt_wanted, pools)
                self._ensure_workload_policy()
                if wanted.result():
                    self._adapt(choice, zone)
        self.adapt_settled = True
        return self._gcloud_create(choice, zone, node_version)

    def _adapt_wanted(self, pools: list[NodePool]) -> bool:
        """Whether to run xpk cluster adapt: only where Kueue lacks something the slice needs
        (an already configured cluster is left as it is: adapt would apply the same objects,
        for half a minute or more), and only where nothing would be lost: adapt rewrites the
        ClusterQueue and the resources configmap for its one device type, and deletes its
        pools of other types."""
        prefix = f"{self.config.cluster_name}-np-"
        if any(p.name.startswith(prefix) for p in pools):
            self.display.info(
                "cluster already has xpk node pools: not running xpk cluster adapt "
                "(it would delete them); using gcloud and repairing Kueue instead"
            )
            return False
        from tpu_trainer.launchers.gke.kueue_setup import read_state, state_findings

        cluster = self.config.cluster_name
        state = read_state(self.kubectl, cluster, self.slice, self.num_slices)
        missing = state_findings(state, cluster, self.slice, self.num_slices)
        if not missing:
            self.kueue_ready = True
            self.display.info(
                f"Kueue already serves {self.slice.kueue_flavor(self.num_slices)}: "
                "xpk cluster adapt is not needed"
            )
            return False
        mine = self.slice.kueue_flavor(self.num_slices)
        key, _ = self.slice.configmap_entry(self.num_slices)
        other_flavors = [
            f.get("name")
            for g in ((state.cluster_queue or {}).get("spec") or {}).get("resourceGroups") or []
            for f in g.get("flavors") or []
            if f.get("name") != mine
        ]
        other_keys = [k for k in (state.configmap_data or {}) if k != key and "maxNodes" not in k]
        if other_flavors or other_keys:
            self.display.info(
                "Kueue serves other slices too "
                f"({', '.join(map(str, other_flavors + other_keys))}): not running xpk cluster "
                "adapt (it would drop them); repairing Kueue in place instead"
            )
            return False
        return True

    def _adapt(self, choice: Choice, zone: str) -> None:
        """Run xpk cluster adapt: it configures Kueue (flavor, queues, priority classes, the
        resources configmap) and makes no node pool. When it fails, its last line is shown and
        the run goes on: gcloud makes the pool, and the configure stage repairs what Kueue
        lacks."""
        result = self.xpk.run(
            cluster_adapt_argv(
                cluster=self.config.cluster_name,
                project=self.config.project_id,
                zone=zone,
                device_type=self.slice.device_type,
                num_slices=self.num_slices,
                reservation=choice.survey.name,
                project_number=self.project_number,
            )
        )
        if result.ok:
            self.display.info(
                "xpk cluster adapt configured Kueue; it creates no node pool (xpk 1.x), so "
                "gcloud creates it"
            )
            return
        self.display.warn(
            f"xpk cluster adapt failed (exit {result.code}: {last_line(result)}); creating the "
            "node pool with gcloud beta and repairing Kueue in place instead"
        )

    def _intent(self, name: str, zone: str, choice: Choice, via: str) -> int:
        """Record a node pool in the store before the call that creates it."""
        return self.store.resource_intent(
            self.run_id,
            kind="nodepool",
            name=name,
            project=self.config.project_id,
            location=self.config.region,
            cluster=self.config.cluster_name,
            detail={"zone": zone, "reservation": choice.survey.name, "via": via},
        )

    # ---- gcloud fallback --------------------------------------------------------------
    def _ensure_workload_policy(self) -> None:
        policy = self.slice.workload_policy
        if policy is None or self.policy_ready:
            return
        if self.gcloud.resource_policy_exists(policy, self.config.region):
            self.policy_ready = True
            return
        rid = self.store.resource_intent(
            self.run_id,
            kind="workload-policy",
            name=policy,
            project=self.config.project_id,
            location=self.config.region,
        )
        result = self.gcloud.create_workload_policy(
            policy, self.config.region, self.slice.topology_name
        )
        if not result.ok and not is_already_exists(result):
            self.store.resource_state(rid, ResourceState.ABSENT)
            raise CommandFailed(result, fix="check the project's Compute Engine permissions")
        self.store.resource_state(rid, ResourceState.CREATED if result.ok else ResourceState.ABSENT)
        self.policy_ready = True

    def _gcloud_create(self, choice: Choice, zone: str, node_version: str) -> Provisioned | None:
        """One pool per slice from this reservation; if one cannot be made, the ones this run
        made here are deleted again and the next reservation is tried."""
        self._ensure_workload_policy()
        made: list[tuple[int, str, bool]] = []
        for index in range(self.num_slices):
            name = tool_pool_name(self.run_id, self.slice, index, self.num_slices)
            got = self._create_one(choice, zone, node_version, name)
            if got is None:
                for rid, own, _ in made:
                    self.display.warn(f"deleting {own}: its reservation cannot hold every slice")
                    self._delete_own(rid, own)
                return None
            made.append(got)
        names = [name for _, name, _ in made]
        new = [name for _, name, reused in made if not reused]
        if new:
            self._note(choice, Outcome.CREATED, f"with gcloud beta: {', '.join(new)}")
        return Provisioned(names[0], zone, created=True, attempts=self.attempts, pools=names)

    def _request(self, choice: Choice, zone: str, node_version: str, name: str) -> NodePoolRequest:
        return NodePoolRequest(
            name=name,
            cluster=self.config.cluster_name,
            project=self.config.project_id,
            region=self.config.region,
            zone=zone,
            reservation=choice.survey.name,
            slice=self.slice,
            node_version=node_version,
            machine_type=machine_types(self.slice, self.config.machine_type)[0],
        )

    def _create_one(
        self, choice: Choice, zone: str, node_version: str, name: str
    ) -> tuple[int, str, bool] | None:
        """Record the pool, create it, wait until it runs: (store id, name, whether it existed
        already); None when the reservation cannot give it (capacity, zone, or ERROR twice)."""
        argv = gcloud_create_argv(self._request(choice, zone, node_version, name))
        for _ in range(2):
            rid = self._intent(name, zone, choice, "gcloud")
            result = self.gcloud.create_node_pool(argv)
            if result.ok:
                self.store.resource_state(rid, ResourceState.CREATED)
                try:
                    self._wait_created(name, created_pool(result))
                except PoolInError:
                    self.display.warn(f"{name} went to ERROR: deleting it (it is this run's)")
                    self._delete_own(rid, name)
                    self._note(choice, Outcome.FAILED, f"{name} went to ERROR; deleted")
                    continue
                return rid, name, False
            retry = self._after_failed_create(choice, rid, name, result)
            if retry is None:
                return None
            if not retry:
                return rid, name, True
        return None

    def _after_failed_create(
        self, choice: Choice, rid: int, name: str, result: CommandResult
    ) -> bool | None:
        """A create that did not succeed: True to try again (an ERROR pool was deleted), False
        when the pool exists after all (409) and runs, None to move to the next reservation."""
        existing = self.gcloud.node_pool(self.config.cluster_name, self.config.region, name)
        if existing is None:
            self.store.resource_state(rid, ResourceState.ABSENT)
        else:
            self.store.resource_state(rid, ResourceState.CREATED, status=existing.status)
        if existing is not None and existing.status == "ERROR":
            if is_already_exists(result):
                self.display.warn(f"{name} exists in ERROR (an earlier attempt): deleting it")
            else:
                self.display.warn(f"{name} went to ERROR: deleting it (it is this run's)")
                self._note(choice, Outcome.FAILED, f"{name} went to ERROR; deleted")
            self._delete_own(rid, name)
            return True
        if is_already_exists(result) and existing is not None:
            self._note(choice, Outcome.REUSED, f"{name} already exists ({existing.status})")
            self._wait_running(name)
            return False
        failure = classify(result)
        outcome = MOVE_ON.get(failure)
        if outcome is not None:
            self._note(choice, outcome, last_line(result))
            return None
        self._note(choice, Outcome.FAILED, last_line(result))
        raise CommandFailed(result, fix=FIXES.get(failure, ""))

    def _delete_own(self, rid: int, name: str) -> None:
        self.store.resource_state(rid, ResourceState.DELETING)
        result = self.gcloud.delete_node_pool(self.config.cluster_name, self.config.region, name)
        if not result.ok:
            self.store.resource_state(rid, ResourceState.CREATED, delete_error=result.text()[-300:])
            raise CommandFailed(result, fix=f"`tpu-trainer cleanup {self.run_id}` retries it")
        self.store.resource_state(rid, ResourceState.DELETED)

    # ---- waiting ----------------------------------------------------------------------
    def _wait_created(self, name: str, printed: NodePool | None) -> NodePool:
        """After a create that succeeded: the pool gcloud printed when it is RUNNING (no need to
        ask again), else wait for it as usual."""
        if printed is not None and printed.name == name and printed.status == "RUNNING":
            self.display.info(f"node pool {name} is RUNNING")
            return printed
        return self._wait_running(name)

    def _wait_running(self, name: str) -> NodePool:
        return wait_running(
            self.gcloud,
            self.config,
            name,
            self.display,
            run_id=self.run_id,
            poll_seconds=self.poll_seconds,
            timeout_s=self.provisioning_timeout_s,
        )


__all__ = [
    "Attempt",
    "CapacityError",
    "PoolInError",
    "Provisioned",
    "Provisioner",
    "matching_pools",
]
