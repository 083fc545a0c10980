"""The Atlas: S2-cell aggregates of a dagger on a map, for city heads (``daggers atlas``).

A Streamlit app (:mod:`web_atlas.app`) over pure-Python helpers that have no Streamlit in them:

* :mod:`web_atlas.settings`: where the data is (InfluxDB URL, database, credentials), from the environment;
* :mod:`web_atlas.influx`: InfluxQL reads: measurements with an S2 tag, windows, per-cell aggregates;
* :mod:`web_atlas.geometry`: S2 cell polygons and centres, vectorised and cached by cell id;
* :mod:`web_atlas.colors`: linear, quantile and diverging colour scales with their legends;
* :mod:`web_atlas.areas`: the service areas (city presets) and the view that shows them;
* :mod:`web_atlas.mapdata`: from per-cell aggregates to the map's columns, rows JSON, legend and view;
* :mod:`web_atlas.coarsen`: coarser S2 cells for a zoomed-out view, each combining its children;
* :mod:`web_atlas.basemap`: the base map under the cells (offline Natural Earth, or a deployment's
  MapLibre style or XYZ tiles) and the place names;
* :mod:`web_atlas.deck`: the pydeck chart (cell polygons, service-area ring, place names, tooltip, view state);
* :mod:`web_atlas.sample`: dagger-shaped sample points, for tests, the benchmark and the screenshot;
* :mod:`web_atlas.browser`: serve the app and drive it in headless Chromium (tests, benchmark);
* :mod:`web_atlas.screenshot`: ``python -m web_atlas.screenshot docs/atlas.png``.

With the default offline base map the page loads nothing from other hosts: MapLibre styles and
GeoJSON served by the app itself from ``web_atlas/static/`` (Streamlit's static serving,
``/app/static/<file>``), and place names drawn by deck.gl.
"""

from __future__ import annotations
