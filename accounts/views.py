"""The sign-in form, under the same lockout as the token endpoint (``accounts.throttling``)."""
from __future__ import annotations

from django.contrib.auth import views as auth_views

from accounts.throttling import (
    client_address,
    login_failure_record,
    login_lockout_remaining,
    login_success_record,
)


class LoginView(auth_views.LoginView):
    template_name = "login.html"

    def post(self, request, *args, **kwargs):
        wait = login_lockout_remaining(username=request.POST.get("username", ""), address=client_address(request))
        if wait:
            response = self.render_to_response(self.get_context_data(form=self.get_form(), locked_for=wait),
                                               status=429)
            response["Retry-After"] = str(wait)
            return response
        return super().post(request, *args, **kwargs)

    def form_invalid(self, form):
        login_failure_record(username=self.request.POST.get("username", ""), address=client_address(self.request))
        return super().form_invalid(form)

    def form_valid(self, form):
        login_success_record(username=form.get_user().get_username(), address=client_address(self.request))
        return super().form_valid(form)
