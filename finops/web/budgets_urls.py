from django.urls import path

from finops.web import budgets_views as views

app_name = "budgets"
urlpatterns = [
    path("", views.budget_list, name="list"),
    path("new/", views.budget_new, name="new"),
    path("<int:pk>/", views.budget_detail, name="detail"),
    path("<int:pk>/edit/", views.budget_edit, name="edit"),
    path("<int:pk>/emails/", views.budget_opt_out, name="opt_out"),
    path("<int:pk>/delete/", views.budget_remove, name="delete"),
]
