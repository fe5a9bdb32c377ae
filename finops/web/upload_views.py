"""Uploads from the Imports page (finance): a billing export or a job log goes down the same
Celery path as the commands; the page then polls the batch's progress as JSON."""

from __future__ import annotations

from typing import Any

from django import forms
from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.core.files.uploadedfile import UploadedFile
from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect, render
from django.template.defaultfilters import filesizeformat
from django.urls import reverse
from django.views.decorators.csrf import csrf_exempt, csrf_protect
from django.views.decorators.http import require_GET, require_POST

from billing_ingest.models import ImportBatch
from billing_ingest.parsers import billing_formats
from billing_ingest.selectors import batch_progress
from billing_ingest.services.uploads import (
    JOB_FORMATS,
    upload_billing_ingest,
    upload_jobs_ingest,
    upload_store,
)
from finops.attribution.selectors.open_jobs import ledger_latest_month, open_jobs_unlisted
from finops.chargeback.checks import OPEN_JOBS_ACTION
from finops.org.permissions import user_is_finance
from finops.run_metrics.parsers.common import RunOptions
from finops.run_metrics.services import (
    FILE_NAMED_FORMATS,
    UPLOAD_FORMATS,
    upload_metrics_ingest,
)
from finops.web.access import require_finance

# Multipart framing around the file: a little over the file limit is still the same file.
_MULTIPART_ALLOWANCE = 64 * 1024


def format_choices() -> list[tuple[str, list[tuple[str, str]]]]:
    return [
        ("Billing export", [(f"billing:{name}", name) for name in billing_formats()]),
        ("Job log", [(f"jobs:{name}", name) for name in JOB_FORMATS]),
        ("Run metrics", [(f"metrics:{name}", name) for name in UPLOAD_FORMATS]),
    ]


class UploadForm(forms.Form):
    format = forms.ChoiceField(choices=format_choices)
    file = forms.FileField()
    source = forms.CharField(
        required=False, max_length=200, help_text="billing: default FORMAT:file name"
    )
    cluster = forms.CharField(
        required=False, max_length=100, help_text="job logs: the cluster the jobs ran on"
    )
    run_id = forms.CharField(
        required=False, max_length=500, label="Run id",
        help_text="run metrics from logs and event files: the run they belong to",
    )  # fmt: skip
    team = forms.SlugField(required=False, max_length=100, help_text="run metrics: team slug")
    model_params = forms.IntegerField(
        required=False, min_value=1, max_value=10**14, label="Model parameters",
        help_text="run metrics: when the file does not say",
    )  # fmt: skip

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        kind, _, name = str(data.get("format", "")).partition(":")
        if kind == "jobs" and not (data.get("cluster") or "").strip():
            # It used to go to a cluster named "default", silently: its jobs would then match
            # no node of the real cluster and its cost would stay idle (issue 29).
            self.add_error(
                "cluster",
                "A job log needs the cluster its jobs ran on (jobs are matched to the billed "
                "nodes of that cluster).",
            )
        if kind == "metrics" and name not in FILE_NAMED_FORMATS and not data.get("run_id"):
            self.add_error("run_id", f"A {name} file names no run: give its run id.")
        return data

    def clean_file(self) -> UploadedFile:
        upload: UploadedFile = self.cleaned_data["file"]
        limit = settings.FINOPS_UPLOAD_MAX_BYTES
        if upload.size is not None and upload.size > limit:
            raise forms.ValidationError(
                f"The file is {filesizeformat(upload.size)}; uploads are limited to "
                f"{filesizeformat(limit)} (FINOPS_UPLOAD_MAX_BYTES). Use ingest_billing for "
                "larger files."
            )
        return upload


def imports_context(form: UploadForm | None = None) -> dict[str, Any]:
    return {
        "upload_form": form or UploadForm(),
        "upload_limit": settings.FINOPS_UPLOAD_MAX_BYTES,
    }


# csrf_exempt outside, csrf_protect inside: the size check reads only the headers, before the
# CSRF check would read (and spool) the whole body.
@csrf_exempt
@login_required
@require_POST
def upload(request: HttpRequest) -> HttpResponse:
    require_finance(request)
    declared = int(request.META.get("CONTENT_LENGTH") or 0)
    if declared > settings.FINOPS_UPLOAD_MAX_BYTES + _MULTIPART_ALLOWANCE:
        error = (
            f"The upload is {filesizeformat(declared)}; the limit is "
            f"{filesizeformat(settings.FINOPS_UPLOAD_MAX_BYTES)} (FINOPS_UPLOAD_MAX_BYTES)."
        )
        return _imports_with_form(request, UploadForm(), status=413, error=error)
    return _upload_checked(request)


@csrf_protect
def _upload_checked(request: HttpRequest) -> HttpResponse:
    form = UploadForm(request.POST, request.FILES)
    if not form.is_valid():
        return _imports_with_form(request, form, status=400)
    kind, _, format_name = form.cleaned_data["format"].partition(":")
    upload_file: UploadedFile = form.cleaned_data["file"]
    path = upload_store(name=upload_file.name or "upload", chunks=upload_file.chunks())
    if kind == "jobs":
        batch = upload_jobs_ingest(
            path=path, format=format_name, cluster=form.cleaned_data["cluster"]
        )
    elif kind == "metrics":
        options = RunOptions(
            run_id=form.cleaned_data["run_id"].strip(),
            team=form.cleaned_data["team"].strip().lower(),
            model_params=form.cleaned_data["model_params"],
        )
        batch = upload_metrics_ingest(path=path, format=format_name, options=options)
    else:
        batch = upload_billing_ingest(
            path=path, format=format_name, source=form.cleaned_data["source"]
        )
    return redirect(f"{reverse('web:imports')}?uploaded={batch.pk}")


def _imports_with_form(
    request: HttpRequest, form: UploadForm, *, status: int, error: str = ""
) -> HttpResponse:

    context = {"page": import_batches_page(request), "upload_error": error, **imports_context(form)}
    return render(request, "web/imports.html", context, status=status)


@login_required
@require_GET
def progress(request: HttpRequest, batch_id: int) -> JsonResponse:
    """{"status", "parts_done", "parts_total", "rows", "finished", "error", ...} (finance)."""
    if not user_is_finance(request.user):
        return JsonResponse({"detail": "Finance only."}, status=403)
    found = batch_progress(batch_id=batch_id)
    if found is None:
        return JsonResponse({"detail": "No such import batch."}, status=404)
    return JsonResponse(found.as_json())


@login_required
def import_batches(request: HttpRequest) -> HttpResponse:
    require_finance(request)
    context = {"page": import_batches_page(request), **imports_context(), **_open_jobs_context()}
    uploaded = request.GET.get("uploaded", "")
    if uploaded.isdigit():
        # The batch just uploaded: the page polls its progress (static/finops-imports.js).
        context["uploaded"] = ImportBatch.objects.filter(id=int(uploaded)).first()
    return render(request, "web/imports.html", context)


def _open_jobs_context() -> dict[str, Any]:
    """The close check "open jobs" for every start: open jobs their cluster's newer job imports
    did not list, and what the newest month of the ledger charges them."""
    month = ledger_latest_month()
    return {
        "open_jobs": open_jobs_unlisted(charged_in=month),
        "open_jobs_month": month,
        "open_jobs_action": OPEN_JOBS_ACTION,
    }


def import_batches_page(request: HttpRequest) -> Any:
    paginator = Paginator(ImportBatch.objects.order_by("-created_at", "-id"), 50)
    return paginator.get_page(request.GET.get("page"))
