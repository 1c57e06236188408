"""Chat URLs. Every view fetches through sessions/selectors.py (scoped to the acting user)."""

from django.urls import path

from sessions import tool_views, views

urlpatterns = [
    path("", views.session_list_view, name="session_list"),
    path("sessions/new/", views.session_create_view, name="session_create"),
    path("sessions/<int:session_id>/", views.session_detail_view, name="session_detail"),
    path("sessions/<int:session_id>/messages/", views.message_send_view, name="message_send"),
    path("sessions/<int:session_id>/steer/", views.message_steer_view, name="message_steer"),
    path("sessions/<int:session_id>/stop/", views.turn_stop_view, name="turn_stop"),
    path("sessions/<int:session_id>/rename/", views.session_rename_view, name="session_rename"),
    path("sessions/<int:session_id>/archive/", views.session_archive_view,
         name="session_archive"),
    path("sessions/<int:session_id>/delete/", views.session_delete_view,
         name="session_delete"),
    path("sessions/<int:session_id>/rewind/", views.session_rewind_view, name="session_rewind"),
    path("sessions/<int:session_id>/events/", views.event_list_view, name="event_list"),
    path("sessions/<int:session_id>/children.json", views.session_children_view,
         name="session_children"),
    path("sessions/<int:session_id>/export.json", views.session_export_view,
         name="session_export"),
    path("sessions/<int:session_id>/edit/", views.message_edit_view, name="message_edit"),
    path("sessions/<int:session_id>/regenerate/", views.turn_regenerate_view,
         name="turn_regenerate"),
    path("sessions/<int:session_id>/fork/", views.session_fork_view, name="session_fork"),
    path("sessions/<int:session_id>/pin/", views.session_pin_view, name="session_pin"),
    path("sessions/<int:session_id>/model/", views.session_model_view, name="session_model"),
    path("sessions/<int:session_id>/gauge/", views.gauge_view, name="session_gauge"),
    path("sessions/<int:session_id>/files/", views.files_view, name="session_files"),
    path("sessions/<int:session_id>/files/download/", views.file_download_view,
         name="file_download"),
    path("sessions/<int:session_id>/files/upload/", views.file_upload_view, name="file_upload"),
    path("sessions/<int:session_id>/raw/", views.message_raw_view, name="message_raw"),
    path("sidebar/", views.sidebar_view, name="sidebar"),
    path("search/", views.search_view, name="search"),
    # issue 13: memory page, todo panel, clarify questions (sessions/tool_views.py)
    path("memory/", tool_views.memory_view, name="memory"),
    path("sessions/<int:session_id>/todo/", tool_views.todo_panel_view, name="todo_panel"),
    path("sessions/<int:session_id>/clarify/<int:question_id>/", tool_views.clarify_card_view,
         name="clarify_card"),
    path("sessions/<int:session_id>/clarify/<int:question_id>/answer/",
         tool_views.clarify_answer_view, name="clarify_answer"),
]
