from django.contrib import admin

from finops.notifications.models import EmailNotification, NotificationPreference


@admin.register(EmailNotification)
class EmailNotificationAdmin(admin.ModelAdmin):
    list_display = ("created_at", "kind", "subject", "status", "attempts", "sent_at")
    list_filter = ("kind", "status")
    search_fields = ("key", "subject")
    readonly_fields = [f.name for f in EmailNotification._meta.fields]


@admin.register(NotificationPreference)
class NotificationPreferenceAdmin(admin.ModelAdmin):
    list_display = ("user", "anomaly_mode", "budget_emails", "updated_at")
    list_filter = ("anomaly_mode", "budget_emails")
    search_fields = ("user__username", "user__email")
