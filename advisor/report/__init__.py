"""``advisor report``: one self-contained HTML page of a recommendation and its evidence.

:mod:`advisor.report.evidence` gathers the numbers (pure data, no plotting), :mod:`advisor.report.figures`
draws them with matplotlib as inline SVG, :mod:`advisor.report.page` lays them out with Jinja2
(templates/report/report.html.j2). matplotlib is imported only here, never on the ``recommend`` path.
"""
