"""The ``sluice`` Airflow plugin: the Sluice web view (jobs, graphs, checkpoints,
executions, restore) as a FastAPI app in the API server at /sluice, and an entry in the
UI's navigation that shows it inside Airflow (at /plugin/sluice)."""
from __future__ import annotations

from airflow.plugins_manager import AirflowPlugin

from sluice_airflow.web.app import app


class SluicePlugin(AirflowPlugin):
    name = "sluice"
    fastapi_apps = [{"app": app, "url_prefix": "/sluice", "name": "Sluice"}]
    external_views = [{
        "name": "Sluice jobs",
        "href": "/sluice/",
        "destination": "nav",
        "url_route": "sluice",      # embedded in Airflow's UI rather than opened in a new tab
    }]
