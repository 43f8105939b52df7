"""Read queries, one module per resource: ``models`` (the list and one model), ``trends`` (series),
``population`` (the median new model's cache and capacity), ``counts`` (models by source).

Plain values in (a session, parameters, catalogued devices), shapes out; no HTTP.
"""
