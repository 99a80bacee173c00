from django.contrib.auth.decorators import login_required
from django.shortcuts import render


@login_required
def index(request):
    """The browser UI: a static page that talks only to the REST API."""
    return render(request, "index.html")
