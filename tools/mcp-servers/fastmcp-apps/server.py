"""A FastMCP-apps server for Atrium's compatibility suite (tests/compat/test_fastmcp_apps.py).

Written the way fastmcp's own `examples/apps/` are (PrefectHQ/fastmcp; read, not copied):
one `FastMCPApp` whose `@app.ui()` entry tool returns a Prefab view (a bar chart, a sortable
table and a form), and an `@app.tool()` backend tool the form calls through the host with
Prefab's `CallTool` (app-only: `_meta.ui.visibility == ["app"]`, hidden from the model).
fastmcp synthesizes the renderer resource (`ui://prefab/tool/<hash>/renderer.html`) and its
CSP; with `PREFAB_BUNDLED_RENDERER=1` the renderer is the single self-contained HTML that
prefab-ui ships (~7 MB, no CDN), which the suite needs offline.

Runs over stdio in its own venv (tools/compat-venvs/fastmcp-apps.txt: fastmcp 4.1.6,
prefab-ui 0.21.1): `.tools/venvs/fastmcp-apps/bin/python server.py`.
"""

from __future__ import annotations

import os

# Offline: the bundled renderer, never the CDN stub (set before prefab-ui reads it), and no
# look-up of a newer fastmcp on PyPI when the banner shows.
os.environ.setdefault("PREFAB_BUNDLED_RENDERER", "1")
os.environ.setdefault("FASTMCP_CHECK_FOR_UPDATES", "off")

from fastmcp import FastMCP, FastMCPApp  # noqa: E402
from prefab_ui.actions import SetState, ShowToast  # noqa: E402
from prefab_ui.actions.mcp import CallTool  # noqa: E402
from prefab_ui.app import PrefabApp  # noqa: E402
from prefab_ui.components import (  # noqa: E402
    Button,
    Column,
    DataTable,
    DataTableColumn,
    Form,
    Heading,
    Input,
    Muted,
    Row,
    Select,
    SelectOption,
    Separator,
)
from prefab_ui.components.charts import BarChart, ChartSeries  # noqa: E402
from prefab_ui.rx import ERROR, RESULT, STATE  # noqa: E402

REGIONS = ("North", "South", "East", "West")

# The harbour's orders: one row per region, the units shipped by sea and by rail.
_orders: list[dict[str, object]] = [
    {"region": "North", "sea": 42, "rail": 18},
    {"region": "South", "sea": 27, "rail": 33},
    {"region": "East", "sea": 35, "rail": 12},
    {"region": "West", "sea": 19, "rail": 26},
]

app = FastMCPApp("Harbour")


@app.tool()
def record_shipment(region: str, units: int, mode: str = "sea") -> list[dict[str, object]]:
    """Add shipped units to a region (called by the view's form; not for the model)."""
    if region not in REGIONS:
        raise ValueError(f"Unknown region {region!r}")
    if mode not in ("sea", "rail"):
        raise ValueError(f"Unknown mode {mode!r}")
    if units <= 0:
        raise ValueError("Units must be positive")
    for order in _orders:
        if order["region"] == region:
            order[mode] = int(order[mode]) + units  # type: ignore[call-overload]
    return [dict(order) for order in _orders]


@app.ui()
def harbour_dashboard() -> PrefabApp:
    """Open the harbour dashboard: shipments per region as a chart and a table, and a form
    to record a shipment."""
    with Column(gap=5, css_class="p-6") as view:
        with Column(gap=1):
            Heading("Harbour shipments")
            Muted("Units shipped per region, by sea and by rail")

        BarChart(
            data="{{ orders }}",
            series=[
                ChartSeries(data_key="sea", label="Sea"),
                ChartSeries(data_key="rail", label="Rail"),
            ],
            x_axis="region",
            show_legend=True,
            height=220,
        )

        DataTable(
            columns=[
                DataTableColumn(key="region", header="Region", sortable=True),
                DataTableColumn(key="sea", header="Sea", sortable=True),
                DataTableColumn(key="rail", header="Rail", sortable=True),
            ],
            rows="{{ orders }}",
        )

        Separator()
        Heading("Record a shipment", level=3)
        with (
            Form(
                on_submit=CallTool(
                    record_shipment,
                    arguments={"region": STATE.region, "units": STATE.units, "mode": "sea"},
                    on_success=[
                        SetState("orders", RESULT),
                        ShowToast("Shipment recorded", variant="success"),
                    ],
                    on_error=ShowToast(ERROR, variant="error"),
                )
            ),
            Row(gap=3, align="end"),
        ):
            with Select(name="region", placeholder="Region"):
                for region in REGIONS:
                    SelectOption(region, value=region)
            Input(name="units", input_type="number", placeholder="Units by sea")
            Button("Record")

    return PrefabApp(
        title="Harbour",
        view=view,
        state={"orders": [dict(order) for order in _orders], "region": "North", "units": ""},
    )


mcp = FastMCP("Harbour", providers=[app])

if __name__ == "__main__":
    mcp.run()  # stdio
