from django.contrib import admin

from finops.notifications.models import EmailNotification


@admin.register(EmailNotification)
class EmailNotificationAdmin(admin.ModelAdmin):
    list_display = ("created_at", "kind", "subject", "status", "attempts", "sent_at")
    list_filter = ("kind", "status")
    search_fields = ("key", "subject")
    readonly_fields = [f.name for f in EmailNotification._meta.fields]
