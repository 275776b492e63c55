"""The computation: events to timelines, the critical path and its components, statistics, heat-map data."""
