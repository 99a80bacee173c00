"""gunicorn's settings for this project (``gunicorn config.wsgi -c config/gunicorn.conf.py``;
workers, threads and the address are given on the command line).

Each worker, once it has loaded the application, opens the database connection of every thread
that will serve and runs the request path's first statements there (``config.warmup``): the first
requests after a start do not each open a connection and meet a cold backend."""


def post_worker_init(worker):
    from config.warmup import warm_worker_threads

    warm_worker_threads(worker)
