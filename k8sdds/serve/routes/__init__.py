"""The HTTP API's routes, one router per resource: `runs` (the runs, their results,
compare, history, runs added), `tasks` (submit, list, show, cancel, resume), `nodes` and
`metrics` (for Prometheus), and `pages` (the web page, out of the OpenAPI document, and its
login form);
`common` holds what they share: the service's parts (`Service`, on `app.state`), the token
check, the error documents and the typed parameters. Each router can be read and tested
alone (`serve.api.create_app` assembles them)."""

from k8sdds.serve.routes import metrics, nodes, pages, runs, tasks

ROUTERS = (pages.public, pages.router, runs.router, tasks.router, nodes.router,
           metrics.router)

__all__ = ["ROUTERS"]
