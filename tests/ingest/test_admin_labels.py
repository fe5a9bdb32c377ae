"""Admin labels read as English (issue 29): "Import batches", not Django's "Import batchs";
"CoreWeave rates", not "Core weave rates"; FX and GPU in capitals."""

from __future__ import annotations

import pytest
from django.test import Client

pytestmark = pytest.mark.django_db


def test_admin_index_labels(client: Client) -> None:
    from django.contrib.auth.models import User

    admin = User.objects.create_superuser("root", "root@example.com", "root-password-123")
    client.force_login(admin)
    text = client.get("/admin/").content.decode()
    for label in ("Import batches", "CoreWeave rates", "FX rates"):
        assert label in text
    for wrong in ("Import batchs", "Core weave rates", "Fx rates"):
        assert wrong not in text
