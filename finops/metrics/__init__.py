"""GET /metrics: the Prometheus text exposition of costs, budgets and the pipeline's freshness
(issue 33, DESIGN section 10). Figures: finops.metrics.selectors; exposition: .views."""
