"""`manage.py fetch_kubernetes_pods --cluster NAME [--kubeconfig PATH | --kubeconfig-env VAR |
--in-cluster] [--context NAME] [--page-size N] [--no-attribute]`.

Snapshots the cluster's pods through its API (the same task the 15-minute schedule runs) and
imports them as one jobs batch. The connection options, when given, are stored on the cluster
for every later fetch; without them the stored connection is used.
"""

from __future__ import annotations

from typing import Any

from celery.exceptions import Retry
from celery.exceptions import TimeoutError as CeleryTimeoutError
from django.core.management.base import BaseCommand, CommandError, CommandParser

from billing_ingest.management.notes import note_lines
from billing_ingest.management.pipeline import request_pipeline
from billing_ingest.models import Cluster, ImportBatch, KubernetesSource, MonthChange
from billing_ingest.services.jobs import cluster_get_or_create
from billing_ingest.services.kubernetes import kubernetes_source_configure
from billing_ingest.services.months import job_months_touched
from billing_ingest.sources import SourceFetchError
from billing_ingest.tasks.kubernetes import TIME_LIMIT, fetch_kubernetes_pods_task


class Command(BaseCommand):
    help = "Snapshot a Kubernetes cluster's pods through its API and import them as jobs."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--cluster", required=True, help="cluster name")
        way = parser.add_mutually_exclusive_group()
        way.add_argument("--kubeconfig", default="", help="kubeconfig file on the worker")
        way.add_argument(
            "--kubeconfig-env", default="", help="environment variable naming the kubeconfig"
        )
        way.add_argument(
            "--in-cluster", action="store_true", help="use the worker pod's service account"
        )
        parser.add_argument("--context", default="", help="kubeconfig context")
        parser.add_argument("--page-size", type=int, default=None, help="pods per list request")
        parser.add_argument(
            "--no-attribute",
            action="store_true",
            help="do not re-attribute the billing months the pods overlap (default: do)",
        )
        parser.add_argument(
            "--timeout", type=float, default=float(TIME_LIMIT), help="seconds to wait"
        )

    def handle(self, *args: Any, **options: Any) -> None:
        cluster = self._cluster(options)
        try:
            summary = fetch_kubernetes_pods_task.delay(cluster.pk).get(timeout=options["timeout"])
        except CeleryTimeoutError:
            raise CommandError(f"cluster {cluster.name}: fetch still running") from None
        except SourceFetchError as exc:
            raise CommandError(str(exc)) from None
        except Retry as exc:
            # Tasks run eagerly (no broker) and propagating: the retry is not re-run in-process.
            raise CommandError(f"{exc.exc}; a transient error, try again later") from None
        status = summary["status"]
        if status == ImportBatch.Status.DUPLICATE:
            self.stdout.write(f"cluster {cluster.name}: pods unchanged since the last snapshot")
        elif status != ImportBatch.Status.SUCCEEDED:
            raise CommandError(f"batch {summary['batch_id']} {status}: {summary['error']}")
        else:
            self.stdout.write(
                f"cluster {cluster.name}: batch {summary['batch_id']} succeeded: "
                f"{summary['row_count']} pods stored"
            )
            for line in note_lines(summary.get("notes") or {}):
                self.stdout.write(f"cluster {cluster.name}: {line}")
        if not options["no_attribute"] and status == ImportBatch.Status.SUCCEEDED:
            months = job_months_touched(batch_ids=[summary["batch_id"]])
            request_pipeline(self, months=months, kind=MonthChange.Kind.JOBS)

    def _cluster(self, options: dict[str, Any]) -> Cluster:
        connection = options["kubeconfig"] or options["kubeconfig_env"] or options["in_cluster"]
        if not connection:
            if options["context"] or options["page_size"] is not None:
                raise CommandError(
                    "--context and --page-size are stored with --kubeconfig, --kubeconfig-env "
                    "or --in-cluster"
                )
            cluster = Cluster.objects.filter(name=options["cluster"]).first()
            if cluster is None or not KubernetesSource.objects.filter(cluster=cluster).exists():
                raise CommandError(
                    f"cluster {options['cluster']!r} has no Kubernetes API connection: give "
                    "--kubeconfig, --kubeconfig-env or --in-cluster once"
                )
            return cluster
        cluster = cluster_get_or_create(name=options["cluster"])
        try:
            kubernetes_source_configure(
                cluster=cluster,
                in_cluster=options["in_cluster"],
                kubeconfig_path=options["kubeconfig"],
                kubeconfig_env=options["kubeconfig_env"],
                context=options["context"],
                page_size=options["page_size"],
            )
        except ValueError as exc:
            raise CommandError(str(exc)) from None
        return cluster
