"""Middleware of the web layer.

HtmxLoginRedirectMiddleware (issue 14, broken item 1): an htmx request from a page left open
after logout was answered by login_required with a 302 to the login page; the browser's XHR
followed it and htmx drew the whole login page inside the chat. Now such a request gets a
401 with ``HX-Redirect`` to the login page, whose ``next`` is the page the user was on (the
``HX-Current-URL`` header, same origin only), so logging in brings them back to it; the chat
keeps the typed text in sessionStorage (static/chat.js).

MethodNotAllowedPageMiddleware: a form's address opened in the browser (from history, the
address bar) was answered by require_POST with a bare 405, which the browser showed as its
own error page. The status stays 405 for everybody, decided before any lookup (the access
matrix: a wrong method reveals nothing), with a page that says what the address is for.
"""

from __future__ import annotations

from urllib.parse import urlsplit

from django.conf import settings
from django.contrib.auth.views import redirect_to_login
from django.http import HttpRequest, HttpResponse
from django.shortcuts import resolve_url
from django.template.loader import render_to_string
from django.utils.http import url_has_allowed_host_and_scheme


class HtmxLoginRedirectMiddleware:
    """Turn login_required's redirect of an htmx request into 401 + HX-Redirect (see the
    module docstring). Must come after django_htmx's HtmxMiddleware (needs request.htmx)."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        if not getattr(request, "htmx", False) or response.status_code not in (301, 302):
            return response
        login_path = urlsplit(resolve_url(settings.LOGIN_URL)).path
        if urlsplit(response.get("Location", "")).path != login_path:
            return response
        current = request.htmx.current_url_abs_path
        if not current or not url_has_allowed_host_and_scheme(
                current, allowed_hosts={request.get_host()}, require_https=request.is_secure()):
            current = "/"
        redirect = HttpResponse("Your session has ended. Log in again to continue.",
                                status=401, content_type="text/plain")
        redirect["HX-Redirect"] = redirect_to_login(current).url
        return redirect


class MethodNotAllowedPageMiddleware:
    """Give a bodiless 405 answered to a page load a readable page (module docstring): the
    page links to the address's parent (e.g. the session a send address belongs to), which
    does its own access check. htmx and other non-page requests keep the bare 405."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        if (response.status_code != 405 or response.content or getattr(request, "htmx", False)
                or "text/html" not in request.headers.get("Accept", "")):
            return response
        parent = request.path.rstrip("/").rsplit("/", 1)[0] + "/"
        page = HttpResponse(render_to_string("405.html", {"parent": parent}, request=request),
                            status=405)
        page["Allow"] = response.get("Allow", "")
        return page
