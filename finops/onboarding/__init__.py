"""Onboarding (issue 33): finance adds teams, maps them and invites people. Above org (its
models) and notifications (the invitation goes through the outbox); no models of its own."""
