"""Alerts: rules over the trends and model events, evaluated after every crawl, delivered by
signed webhooks, Atom feeds and e-mail.

Modules: ``rules`` (pure rule evaluation), ``evaluate`` (state, events, outbox), ``delivery``
(the worker), ``webhooks`` (Standard Webhooks), ``ssrf`` (vetting and pinning target URLs),
``email``, ``feeds``, ``subscriptions``, ``limits``, ``tables``. Its URLs are ``web.api.alerts`` and
``web.pages.alerts``/``feeds``. Imports ``core``, ``settings``, ``store`` and ``hub``.
"""
