from django.apps import AppConfig
from django.db.models.signals import post_migrate, post_save


class OrgConfig(AppConfig):
    name = "finops.org"
    label = "org"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from finops.org.models import Profile
        from finops.org.roles import _on_post_migrate, _on_profile_saved

        # Not limited to this app's migrate: the permissions of apps migrated after org exist
        # only once their own post_migrate ran, and ensuring the groups is idempotent and cheap.
        post_migrate.connect(_on_post_migrate, dispatch_uid="org-role-groups")
        post_save.connect(_on_profile_saved, sender=Profile, dispatch_uid="org-profile-role")
